package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Marker secrets: each is unique, so finding one anywhere it does not
// belong is a leak.
const (
	leakTenantPassword = "MARKER-TENANT-PASSWORD-7f3a"
	leakBrokerPassword = "MARKER-BROKER-PASSWORD-91c2"
	leakParamPassword  = "MARKER-PARAM-PASSWORD-5d0e"
	leakParamSize      = "MARKER-PARAM-SIZE-2b8c"
)

// leakResetInstance is the instance whose calls the broker answers by
// resetting the connection.
const leakResetInstance = "leak-reset-1"

// leakGateway is the gateway wired as osb-gateway serve wires it
// (newObservability), except that the stdout span exporter writes to a
// buffer: serve hands telemetry.Setup no WithStdout.
type leakGateway struct {
	base    string // the platform listener
	metrics string // GET /metrics
	logs    *osbtest.Buffer
	spans   *osbtest.Buffer
	audit   string // the audit file
	stop    func() // stops the gateway, flushes the audit log and spans
}

func startLeakGateway(t *testing.T, brokerURL, requests string) *leakGateway {
	t.Helper()
	return startLeakGatewayAuth(t, brokerURL, requests, "username: broker-user, password: "+leakBrokerPassword)
}

// startLeakGatewayAuth is startLeakGateway with the broker's credentials
// (auth) as flow-mapping keys (leak_auth_test.go).
func startLeakGatewayAuth(t *testing.T, brokerURL, requests, auth string) *leakGateway {
	t.Helper()
	dir := t.TempDir()
	lg := &leakGateway{logs: &osbtest.Buffer{}, spans: &osbtest.Buffer{}, audit: filepath.Join(dir, "audit.log")}
	y := `
listen: {address: "127.0.0.1:0"}
admin: {address: "127.0.0.1:0"}
state: {backend: memory}
log: {format: json, level: debug}
audit: {sink: file, path: "` + lg.audit + `", fsync: always}
telemetry: {traces: {exporter: stdout, sample_ratio: 1}}
brokers: [{name: b, url: "` + brokerURL + `", ` + auth + `,
  api_version: {min: "2.13", max: "2.17"}, validation: {requests: ` + requests + `}}]
tenants: [{name: t, credentials: [{username: u, password: ` + leakTenantPassword + `}], routes: [{broker: b}]}]
`
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := newLogs(cfg.Log, lg.logs)
	log := logs.log
	obs, err := newObservability(cfg, log, telemetry.WithStdout(lg.spans))
	if err != nil {
		t.Fatal(err)
	}
	st, _, err := openStore(cfg.State, log)
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, obs.options(proxy.Options{Logger: log, AccessLog: logs.access, Store: st}))
	if err != nil {
		t.Fatal(err)
	}
	platform := httptest.NewServer(g)
	admin := httptest.NewServer(obs.prov.MetricsHandler())
	lg.base, lg.metrics = platform.URL, admin.URL
	var once sync.Once
	lg.stop = func() {
		once.Do(func() {
			platform.Close()
			admin.Close()
			g.Close(nil)
			logs.access.Close() // the buffered access lines
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			obs.close(ctx) // the audit log and the spans
			st.Close()
		})
	}
	t.Cleanup(lg.stop)
	return lg
}

// leakCall is one platform call through the gateway.
type leakCall struct {
	name, method, path, body string
	want                     int
}

// do sends c as tenant u and returns the response body.
func (lg *leakGateway) do(t *testing.T, c leakCall) string {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, lg.base+"/t/b"+c.path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("u", leakTenantPassword)
	req.Header.Set("X-Broker-API-Version", "2.17")
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != c.want {
		t.Errorf("%s: %s %s = %d, want %d; body %s", c.name, c.method, c.path, res.StatusCode, c.want, b)
	}
	return string(b)
}

// TestNoSecretLeaks runs a lifecycle (provision, bind, fetch binding,
// unbind, deprovision, and a provision refused by the plan's schema)
// through the gateway and checks that no credential, binding credential
// or parameter value reaches the logs, the audit file, the exported spans
// or /metrics, and that no gateway-made error body carries a credential.
func TestNoSecretLeaks(t *testing.T) {
	for _, mode := range []string{config.ModeEnforce, config.ModeReport} {
		t.Run("requests "+mode, func(t *testing.T) { testNoSecretLeaks(t, mode) })
	}
}

func testNoSecretLeaks(t *testing.T, requests string) {
	sb := samplebroker.New(samplebroker.Options{Username: "broker-user", Password: leakBrokerPassword, AsyncDelay: -1})
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, leakResetInstance) {
			sb.ServeHTTP(w, r)
			return
		}
		// The broker resets the connection: the transport's error names
		// its address, which the platform must not read.
		c, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err) // httptest.Server's connections can be hijacked
		}
		_ = c.(*net.TCPConn).SetLinger(0)
		c.Close()
	}))
	defer broker.Close()
	lg := startLeakGateway(t, broker.URL, requests)

	const inst, bind = "leak-instance-1", "leak-binding-1"
	ids := `"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `"`
	ctx := `"organization_guid":"org-1","space_guid":"space-1"`
	query := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	calls := []leakCall{
		{"provision", "PUT", "/v2/service_instances/" + inst,
			`{` + ids + `,` + ctx + `,"parameters":{"size":"small","db_password":"` + leakParamPassword + `"}}`, 201},
		{"bind", "PUT", "/v2/service_instances/" + inst + "/service_bindings/" + bind,
			`{` + ids + `,"bind_resource":{"app_guid":"app-1"},"parameters":{"db_password":"` + leakParamPassword + `"}}`, 201},
		{"fetch binding", "GET", "/v2/service_instances/" + inst + "/service_bindings/" + bind, "", 200},
		{"unbind", "DELETE", "/v2/service_instances/" + inst + "/service_bindings/" + bind + query, "", 200},
		{"deprovision", "DELETE", "/v2/service_instances/" + inst + query, "", 200},
		{"provision refused by the plan's schema", "PUT", "/v2/service_instances/leak-instance-2",
			`{` + ids + `,` + ctx + `,"parameters":{"size":"` + leakParamSize + `","db_password":"` + leakParamPassword + `"}}`, 400},
		{"poll of a broker that resets the connection", "GET", "/v2/service_instances/" + leakResetInstance + "/last_operation", "", 502},
	}
	bodies := map[string]string{}
	for _, c := range calls {
		bodies[c.name] = lg.do(t, c)
	}

	// The binding's credentials are the broker's secret for the platform:
	// the bind and fetch responses carry them, nothing else may.
	var bound struct {
		Credentials struct{ Username, Password, URI string }
	}
	if err := json.Unmarshal([]byte(bodies["bind"]), &bound); err != nil || bound.Credentials.Password == "" {
		t.Fatalf("bind response without credentials (%v): %s", err, bodies["bind"])
	}
	if !strings.Contains(bodies["fetch binding"], bound.Credentials.Password) {
		t.Errorf("fetch binding lacks the binding's password: %s", bodies["fetch binding"])
	}
	t.Logf("schema refusal: %s", bodies["provision refused by the plan's schema"])

	res, err := http.Get(lg.metrics)
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), "osb_gateway_requests") {
		t.Errorf("/metrics lacks the request counter:\n%s", metrics)
	}
	lg.stop() // flushes the audit log and the spans
	auditLog, err := os.ReadFile(lg.audit)
	if err != nil {
		t.Fatal(err)
	}

	// Each sink must have seen the calls, or finding nothing proves nothing.
	sinks := []struct {
		name, text, evidence string
	}{
		{"logs", lg.logs.String(), inst},
		{"audit log", string(auditLog), inst},
		{"spans", lg.spans.String(), "osb provision"},
		{"metrics", string(metrics), "osb_gateway_requests"},
	}
	secrets := map[string]string{
		"tenant password":          leakTenantPassword,
		"broker password":          leakBrokerPassword,
		"parameter value":          leakParamPassword,
		"refused parameter value":  leakParamSize,
		"binding password":         bound.Credentials.Password,
		"binding username":         bound.Credentials.Username,
		"tenant basic credentials": basicAuth("u", leakTenantPassword),
		"broker basic credentials": basicAuth("broker-user", leakBrokerPassword),
	}
	for _, s := range sinks {
		if !strings.Contains(s.text, s.evidence) {
			t.Errorf("%s lack %q: did the calls reach them?\n%s", s.name, s.evidence, s.text)
		}
		for what, secret := range secrets {
			if i := strings.Index(s.text, secret); i >= 0 && knownLeaks[s.name+": "+what] != "" {
				t.Logf("known leak (%s), not failing: %s hold the %s", knownLeaks[s.name+": "+what], s.name, what)
			} else if i >= 0 {
				t.Errorf("%s hold the %s: …%s…", s.name, what, excerpt(s.text, i, len(secret)))
			}
		}
	}
	// Error bodies the gateway writes may quote the platform's own input,
	// never a credential, nor where the broker is (the platform reaches it
	// through the gateway only: TestBrokerAddressNeverReachesThePlatform in
	// proxy/ drives the broker faults that used to show it).
	secrets["broker address"] = strings.TrimPrefix(broker.URL, "http://")
	for name, body := range bodies {
		if name == "bind" || name == "fetch binding" {
			continue
		}
		for _, what := range []string{"tenant password", "broker password", "binding password",
			"tenant basic credentials", "broker basic credentials", "broker address"} {
			if strings.Contains(body, secrets[what]) {
				t.Errorf("%s response holds the %s: %s", name, what, body)
			}
		}
	}
}

// knownLeaks are leaks found by TestNoSecretLeaks and not fixed yet, by
// "sink: secret"; each is logged instead of failing the test. Remove an
// entry once its leak is fixed.
var knownLeaks = map[string]string{}

// basicAuth is the value of an Authorization header's credentials.
func basicAuth(user, pass string) string {
	r, _ := http.NewRequest("GET", "/", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

// excerpt is s around the n bytes at i.
func excerpt(s string, i, n int) string {
	return s[max(0, i-600):min(len(s), i+n+120)]
}
