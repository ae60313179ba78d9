package e2e

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// processToken is the admin token of the gateway process; the fault table
// reads its locks and orphans through the admin API.
const processToken = "fault-table-admin-token"

// gatewayProc is the osb-gateway binary serving one broker from a bolt
// file, behind a tapped reverse proxy that follows it across restarts.
type gatewayProc struct {
	bin, dir, brokerURL string
	target              atomic.Pointer[url.URL] // the running process's listener
	adminURL            string
	cmd                 *exec.Cmd
	done                chan struct{}
	logs                *bytes.Buffer
	// state and broker, when set, replace the state section and add keys
	// to the broker's (", key: value, ..."); timeout, when set, is the
	// broker's (else 5s): see faults_shim_test.go.
	state, broker, timeout string
}

// startProcess runs the gateway binary in front of brokerURL, with the
// platform's tap before it.
func (f *faultEnv) startProcess(t *testing.T, brokerURL string) {
	t.Helper()
	p := &gatewayProc{bin: osbtest.GatewayBinary(t), dir: t.TempDir(), brokerURL: brokerURL}
	front := &tap{h: &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.SetURL(p.target.Load()) }}}
	srv := httptest.NewServer(front)
	t.Cleanup(srv.Close)
	f.platforms, f.urls, f.proc = []*tap{front}, []string{srv.URL}, p
	p.start(t)
}

// start runs the binary on the bolt file of p.dir until the test ends or
// kill9 kills it.
func (p *gatewayProc) start(t *testing.T) {
	t.Helper()
	listen, admin := osbtest.FreeAddr(t), osbtest.FreeAddr(t)
	state := cmp.Or(p.state, fmt.Sprintf("{backend: bolt, path: %q}", filepath.Join(p.dir, "state.db")))
	y := fmt.Sprintf(`
listen: {address: %q, server: %s}
admin: {address: %q, token: %q}
state: %s
log: {format: json, level: warn}
brokers: [{name: b, url: %q, username: sample-user, password: sample-s3cret, timeout: %s, transport: %s%s}]
tenants: [{name: t, credentials: [{username: platform-user, password: platform-pass}], routes: [{broker: b}]}]
`, listen, cmp.Or(suiteServer, config.DefaultListenServer), admin, processToken, state, p.brokerURL, cmp.Or(p.timeout, "5s"), cmp.Or(suiteTransport, config.DefaultBrokerTransport), p.broker)
	path := filepath.Join(p.dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(p.bin, "serve", "-config", path)
	logs := &bytes.Buffer{}
	cmd.Stderr = logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("gateway process log:\n%s", logs)
		}
	})
	p.cmd, p.done, p.logs, p.adminURL = cmd, done, logs, "http://"+admin
	waitFor(t, "the gateway process to be ready", func() bool {
		res, err := http.Get(p.adminURL + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	p.target.Store(&url.URL{Scheme: "http", Host: listen})
}

// kill9 kills the process with SIGKILL, as a crash or the OOM killer
// would: nothing of it runs after the signal.
func (p *gatewayProc) kill9(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatalf("kill -9: %v", err)
	}
	await(t, p.done, "the killed gateway process to exit")
}

// killAndRestart is a step's after: kill -9, then a new process on the
// same bolt file.
func killAndRestart(t *testing.T, f *faultEnv) {
	f.proc.kill9(t)
	f.proc.start(t)
}

// admin GETs an admin API path into v.
func (p *gatewayProc) admin(path string, v any) error {
	req, err := http.NewRequest(http.MethodGet, p.adminURL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+processToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, res.Status)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// suiteTransport is every gateway's broker transport in these tests
// (OSB_GATEWAY_TEST_TRANSPORT: standard or lean; unset: each broker's own),
// so that the whole suite passes on both.
var suiteTransport = os.Getenv("OSB_GATEWAY_TEST_TRANSPORT")

func TestMain(m *testing.M) {
	switch suiteTransport {
	case "", config.TransportStandard, config.TransportLean:
	default:
		fmt.Fprintf(os.Stderr, "OSB_GATEWAY_TEST_TRANSPORT=%q: want standard or lean\n", suiteTransport)
		os.Exit(2)
	}
	switch suiteServer {
	case "", config.ServerStandard, config.ServerLean:
	default:
		fmt.Fprintf(os.Stderr, "OSB_GATEWAY_TEST_SERVER=%q: want standard or lean\n", suiteServer)
		os.Exit(2)
	}
	code := m.Run()
	osbtest.RemoveBuilt() // the binary the process rows built
	os.Exit(code)
}
