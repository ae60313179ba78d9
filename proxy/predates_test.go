package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// gatewayWith is testGateway with Options of the test's own (a logger
// that discards is filled in).
func gatewayWith(t *testing.T, yaml string, env map[string]string, opts Options) (*Gateway, *httptest.Server) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

// oldBrokerYAML fronts a 2.8 sample broker ("old", and "fetch" with the
// fetch emulation on) and an echoing broker that speaks 2.17 ("echo"),
// requests and responses enforced.
const oldBrokerYAML = `
admin: {address: "off"}
brokers:
  - name: old
    url: ${OLD_URL}
    username: sample
    password: sample-secret
    api_version: {max: "2.8"}
    validation: {requests: enforce, responses: enforce}
  - name: fetch
    url: ${OLD_URL}
    username: sample
    password: sample-secret
    api_version: {max: "2.8"}
    emulate: {fetch: true}
  - name: echo
    url: ${ECHO_URL}
    validation: {requests: enforce, responses: enforce, without_catalog: forward}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: old}, {broker: fetch}, {broker: echo}]
`

// oldBroker starts a legacy (2.8) sample broker that records what reaches
// it, an echoing broker, and a gateway before both.
func oldBroker(t *testing.T) (g *Gateway, gw *httptest.Server, old, echo *osbtest.Broker) {
	t.Helper()
	sample := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", Legacy: true})
	old, echo = osbtest.NewBroker(t, sample.ServeHTTP), osbtest.NewBroker(t, nil)
	g, gw = gatewayWith(t, oldBrokerYAML, map[string]string{"OLD_URL": old.URL, "ECHO_URL": echo.URL}, Options{})
	return g, gw, old, echo
}

// TestAsyncBindToAnOldBrokerIsServedSynchronously: a bind and an unbind
// with accepts_incomplete=true reach a 2.8 broker without the flag, and the
// platform gets the broker's synchronous answer where it got 412 before.
func TestAsyncBindToAnOldBrokerIsServedSynchronously(t *testing.T) {
	_, gw, old, echo := oldBroker(t)
	base := gw.URL + "/t1/old/v2/service_instances/i1"
	if res, body := do(t, "PUT", base, t1User, t1Pass, "2.15", strings.NewReader(provisionBody(samplebroker.PlanSyncID, ""))); res.StatusCode != 201 {
		t.Fatalf("provision: %d %s", res.StatusCode, body)
	}
	bind := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app-1"}}`, samplebroker.ServiceID, samplebroker.PlanSyncID)
	res, body := do(t, "PUT", base+"/service_bindings/b1?accepts_incomplete=true", t1User, t1Pass, "2.15", strings.NewReader(bind))
	if res.StatusCode != http.StatusCreated || !strings.Contains(body, `"credentials"`) {
		t.Fatalf("bind: %d %s, want the broker's synchronous 201 with credentials", res.StatusCode, body)
	}
	if got := old.Last(t); got.URL.RawQuery != "" || got.Header.Get("X-Broker-API-Version") != "2.8" {
		t.Errorf("the broker got the bind with query %q at version %q, want no query at 2.8", got.URL.RawQuery, got.Header.Get("X-Broker-API-Version"))
	}
	unbind := fmt.Sprintf("%s/service_bindings/b1?service_id=%s&accepts_incomplete=true&plan_id=%s", base, samplebroker.ServiceID, samplebroker.PlanSyncID)
	if res, body := do(t, "DELETE", unbind, t1User, t1Pass, "2.17", nil); res.StatusCode != http.StatusOK {
		t.Fatalf("unbind: %d %s, want the broker's synchronous 200", res.StatusCode, body)
	}
	wantQuery := "service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	if got := old.Last(t).URL.RawQuery; got != wantQuery {
		t.Errorf("the broker got the unbind with query %q, want %q", got, wantQuery)
	}

	// A broker that has asynchronous bindings gets the flag as sent.
	res, body = do(t, "PUT", gw.URL+"/t1/echo/v2/service_instances/i1/service_bindings/b1?accepts_incomplete=true&x=1", t1User, t1Pass, "2.17",
		strings.NewReader(`{"service_id":"s","plan_id":"p"}`))
	if res.StatusCode != http.StatusOK {
		t.Fatalf("bind to a 2.17 broker: %d %s", res.StatusCode, body)
	}
	if got := echo.Last(t).URL.RawQuery; got != "accepts_incomplete=true&x=1" {
		t.Errorf("the 2.17 broker got query %q, want it as sent", got)
	}
}

// TestOldBrokerEmulationClaimsBeforeThe412: what the broker cannot serve
// gets 412 naming the version needed, unless an emulation claims it first
// (here the fetch emulation: GET instance and GET binding answered from the
// inventory, which never saw these).
func TestOldBrokerEmulationClaimsBeforeThe412(t *testing.T) {
	_, gw, old, _ := oldBroker(t)
	tests := []struct {
		name, route, path string
		status            int
		golden            string
	}{
		{"GET binding", "old", "/v2/service_instances/i1/service_bindings/b1", 412, "version_broker_max_binding"},
		{"GET binding, emulated", "fetch", "/v2/service_instances/i1/service_bindings/b1", 404, ""},
		{"GET instance, emulated", "fetch", "/v2/service_instances/i1", 404, ""},
		{"binding last_operation, which no emulation claims", "fetch", "/v2/service_instances/i1/service_bindings/b1/last_operation", 412, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(old.Requests())
			res, body := do(t, "GET", gw.URL+"/t1/"+tc.route+tc.path, t1User, t1Pass, "2.15", nil)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if len(old.Requests()) != n {
				t.Errorf("the broker was reached")
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, body)
			}
		})
	}
}

// rotationCatalog has a service whose plan p-rot may be rotated and whose
// plan p-fixed may not.
const rotationCatalog = `{"services":[{"id":"s-1","name":"db","description":"a database","bindable":true,"plans":[
  {"id":"p-rot","name":"rot","description":"rotatable","binding_rotatable":true},
  {"id":"p-fixed","name":"fixed","description":"not rotatable"}]}]}`

// rotationBroker serves rotationCatalog and answers every bind 201; a
// bind whose body has "expiring" answers with metadata whose expires_at is
// no timestamp.
func rotationBroker(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.URL.Path == "/v2/catalog":
		io.WriteString(w, rotationCatalog)
	case r.Method == http.MethodPut && strings.Contains(string(body), "expiring"):
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"credentials":{},"metadata":{"expires_at":"next week"}}`)
	case r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"credentials":{},"metadata":{"expires_at":"2030-01-31T00:00:00Z","renew_before":"2030-01-24T00:00:00Z"}}`)
	default:
		io.WriteString(w, `{}`)
	}
}

// rotationYAML fronts one 2.17 broker three ways: as it is ("rot"), with
// an inventory that holds every binding ("gone", emulate.gone), and capped
// at 2.15 ("capped").
const rotationYAML = `
admin: {address: "off"}
brokers:
  - name: rot
    url: ${URL}
    validation: {requests: enforce, responses: enforce}
  - name: gone
    url: ${URL}
    validation: {requests: enforce, responses: enforce}
    emulate: {gone: true}
  - name: capped
    url: ${URL}
    api_version: {max: "2.15"}
    validation: {requests: enforce, responses: enforce}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: rot}, {broker: gone}, {broker: capped}]
`

// TestRotation checks a bind with predecessor_binding_id on the wire: the
// plan must be binding_rotatable (but for a broker below 2.17, which gets
// an ordinary bind), and the predecessor must be a binding of the instance
// in the inventory — refused when the inventory is authoritative
// (emulate.gone), a finding otherwise.
func TestRotation(t *testing.T) {
	broker := osbtest.NewBroker(t, rotationBroker)
	st, err := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, b := range []store.Binding{
		{Broker: "rot", InstanceID: "i1", BindingID: "b0"},
		{Broker: "gone", InstanceID: "i1", BindingID: "b0"},
		{Broker: "gone", InstanceID: "i2", BindingID: "b-other"},
		{Broker: "capped", InstanceID: "i1", BindingID: "b0"},
	} {
		if _, err := st.PutBinding(t.Context(), b); err != nil {
			t.Fatal(err)
		}
	}
	aw := &recordingWriter{}
	_, gw := gatewayWith(t, rotationYAML, map[string]string{"URL": broker.URL}, Options{Store: st, Audit: &AuditOptions{Writer: aw}})
	rotation := func(plan, predecessor string) string {
		return fmt.Sprintf(`{"service_id":"s-1", "plan_id":%q, "predecessor_binding_id":%q, "bind_resource":{"app_guid":"a"}}`, plan, predecessor)
	}
	tests := []struct {
		name, broker, instance, body string
		status                       int
		golden                       string
		brokerGets                   string // the body the broker must get; "" for the body as sent
		finding                      string // a rule the audit record must list
	}{
		{name: "rotatable plan, known predecessor", broker: "rot", instance: "i1", body: rotation("p-rot", "b0"), status: 201},
		{name: "plan not rotatable", broker: "rot", instance: "i1", body: rotation("p-fixed", "b0"), status: 400, golden: "validate_not_rotatable"},
		{name: "unknown predecessor, authoritative inventory", broker: "gone", instance: "i1", body: rotation("p-rot", "b9"), status: 400,
			golden: "validate_unknown_predecessor"},
		{name: "predecessor of another instance, authoritative inventory", broker: "gone", instance: "i1", body: rotation("p-rot", "b-other"),
			status: 400},
		{name: "known predecessor, authoritative inventory", broker: "gone", instance: "i1", body: rotation("p-rot", "b0"), status: 201},
		{name: "unknown predecessor, inventory not authoritative", broker: "rot", instance: "i1", body: rotation("p-rot", "b9"), status: 201,
			finding: "request.predecessor_binding_id.unknown"},
		{name: "bridged as an ordinary bind below 2.17", broker: "capped", instance: "i1", body: rotation("p-fixed", "b0"), status: 201,
			brokerGets: `{"service_id":"s-1", "plan_id":"p-fixed", "bind_resource":{"app_guid":"a"}}`},
		{name: "expiry that is no timestamp, refused", broker: "rot", instance: "i1",
			body: `{"service_id":"s-1","plan_id":"p-rot","parameters":{"expiring":true}}`, status: 502, golden: "response_expiry_format"},
		{name: "expiry that is no timestamp to a 2.17 platform of a capped broker", broker: "capped", instance: "i1",
			body: `{"service_id":"s-1","plan_id":"p-rot","parameters":{"expiring":true}}`, status: 502},
	}
	binds := func() []*http.Request {
		var rs []*http.Request
		for _, r := range broker.Requests() {
			if r.Method == http.MethodPut {
				rs = append(rs, r)
			}
		}
		return rs
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(binds())
			path := fmt.Sprintf("%s/t1/%s/v2/service_instances/%s/service_bindings/new-%d", gw.URL, tc.broker, tc.instance, i)
			res, body := do(t, "PUT", path, t1User, t1Pass, "2.17", strings.NewReader(tc.body))
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			reqs := binds()
			if reached := len(reqs) > n; reached != (tc.status != 400) {
				t.Fatalf("broker reached = %v", reached)
			}
			if tc.status != 400 {
				got, _ := io.ReadAll(reqs[len(reqs)-1].Body)
				want := tc.brokerGets
				if want == "" {
					want = tc.body
				}
				if string(got) != want {
					t.Errorf("the broker got\n%s\nwant\n%s", got, want)
				}
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, body)
			}
			if tc.finding != "" {
				waitForFinding(t, aw, path[len(gw.URL):], tc.finding)
			}
		})
	}
}

// waitForFinding waits for the audit record of the call to path and
// checks that it lists the rule.
func waitForFinding(t *testing.T, aw *recordingWriter, path, rule string) {
	t.Helper()
	bindingID := path[strings.LastIndexByte(path, '/')+1:]
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		aw.mu.Lock()
		for _, r := range aw.recs {
			if r.BindingID != bindingID {
				continue
			}
			aw.mu.Unlock()
			for _, f := range r.Findings {
				if f.Rule == rule {
					return
				}
			}
			t.Fatalf("audit record of %s has findings %+v, want %s", path, r.Findings, rule)
		}
		aw.mu.Unlock()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("no audit record of %s", path)
}
