package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// gatewayProcess is the real binary serving a configuration.
type gatewayProcess struct {
	cmd  *exec.Cmd
	base string
	logs *bytes.Buffer
	done chan error
}

// startGateway writes a configuration with state (a YAML flow mapping) in
// front of brokerURL and runs the binary on it until the test ends.
func startGateway(t *testing.T, dir, name, state, brokerURL string) *gatewayProcess {
	t.Helper()
	listen, admin := osbtest.FreeAddr(t), osbtest.FreeAddr(t)
	y := fmt.Sprintf(`
listen: {address: %q, shutdown_grace: 2s}
admin: {address: %q}
state: %s
log: {format: json, level: warn}
brokers: [{name: b, url: %q, username: sample, password: sample-secret}]
tenants: [{name: t, credentials: [{username: u, password: pass}], routes: [{broker: b}]}]
`, listen, admin, state, brokerURL)
	path := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &gatewayProcess{cmd: exec.Command(osbtest.GatewayBinary(t), "serve", "-config", path), base: "http://" + listen,
		logs: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("%s log:\n%s", name, p.logs.String())
		}
	})
	waitReady(t, "http://"+admin)
	return p
}

// stop ends the process with SIGTERM and waits for it.
func (p *gatewayProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}

func (p *gatewayProcess) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var in io.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, p.base+"/t/b"+path, in)
	req.SetBasicAuth("u", "pass")
	req.Header.Set("X-Broker-API-Version", "2.15")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

var (
	asyncProvisionBody = fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s"}`, samplebroker.ServiceID, samplebroker.PlanAsyncID)
	updateBody         = fmt.Sprintf(`{"service_id":%q,"parameters":{"x":1}}`, samplebroker.ServiceID)
	inProgress         = `{"description":"Another operation for this service instance is in progress."}` + "\n"
)

func sampleBrokerServer(t *testing.T) *httptest.Server {
	t.Helper()
	b := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Hour}))
	t.Cleanup(b.Close)
	return b
}

// TestBoltStateSurvivesRestart: a gateway restarted during an async
// provision still answers 400 to an update.
func TestBoltStateSurvivesRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	dir, broker := t.TempDir(), sampleBrokerServer(t)
	state := fmt.Sprintf(`{backend: bolt, path: %q}`, filepath.Join(dir, "state.db"))
	first := startGateway(t, dir, "first", state, broker.URL)
	if code, body := first.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Fatalf("provision: %d %s", code, body)
	}
	first.stop(t)
	second := startGateway(t, dir, "second", state, broker.URL)
	if code, body := second.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 400 || body != inProgress {
		t.Errorf("update after the restart: %d %s", code, body)
	}
}

// TestRedisStateSharedByReplicas: two gateway processes on one Redis; an
// async provision through one blocks an update through the other.
func TestRedisStateSharedByReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := storetest.StartRedis(t)
	dir, broker := t.TempDir(), sampleBrokerServer(t)
	state := fmt.Sprintf(`{backend: redis, redis: {addrs: [%q]}}`, r.Addr)
	one := startGateway(t, dir, "one", state, broker.URL)
	two := startGateway(t, dir, "two", state, broker.URL)
	if code, body := one.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Fatalf("provision through one: %d %s", code, body)
	}
	if code, body := two.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 400 || body != inProgress {
		t.Errorf("update through two: %d %s", code, body)
	}
	if code, body := two.call(t, "PATCH", "/v2/service_instances/other?accepts_incomplete=true", updateBody); code == 400 && body == inProgress {
		t.Errorf("another instance is blocked too")
	}
}

// TestPostgresStateSharedByReplicas: two gateway processes on one
// PostgreSQL database (the first creates the schema at start; replicas
// starting together: TestPostgresMigrateTogether in internal/store/postgres);
// an async provision through one blocks an update through the other; with the
// database down a mutating call fails closed with 503, and once it is back
// the lock still holds. The URL's password is never logged.
func TestPostgresStateSharedByReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	const secret = "pg-s3cret-pw" // the test server trusts loopback: any password passes
	pg := storetest.StartPostgres(t)
	url := strings.Replace(pg.StoreConfig(t).Postgres.URL, "postgres@", "postgres:"+secret+"@", 1)
	dir, broker := t.TempDir(), sampleBrokerServer(t)
	state := fmt.Sprintf(`{backend: postgres, postgres: {url: %q, connect_timeout: 2s, statement_timeout: 2s}}`, url)
	one := startGateway(t, dir, "one", state, broker.URL) // creates the schema
	two := startGateway(t, dir, "two", state, broker.URL)
	if code, body := one.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Fatalf("provision through one: %d %s", code, body)
	}
	if code, body := two.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 400 || body != inProgress {
		t.Errorf("update through two: %d %s", code, body)
	}
	pg.Stop()
	if code, body := two.call(t, "PUT", "/v2/service_instances/i2?accepts_incomplete=true", asyncProvisionBody); code != 503 {
		t.Errorf("provision with the database down: %d %s, want 503", code, body)
	}
	pg.Start()
	if code, body := two.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 400 || body != inProgress {
		t.Errorf("update through two, the database back: %d %s", code, body)
	}
	for name, p := range map[string]*gatewayProcess{"one": one, "two": two} {
		p.stop(t) // its log is complete, and read after the process wrote it
		if strings.Contains(p.logs.String(), secret) {
			t.Errorf("gateway %s logged the URL's password", name)
		}
	}
}
