package proxy

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// sampleBroker serves a sample broker (the credentials of protectYAML)
// behind hold, which can keep calls waiting.
func sampleBroker(t *testing.T) (*samplebroker.Broker, *hold, string) {
	t.Helper()
	sb := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Minute})
	h := &hold{next: sb}
	return sb, h, httptestServer(t, h).URL
}

// hold passes calls to next, except that while on, each call other than
// the catalog announces itself on arrived and waits for release.
type hold struct {
	next    http.Handler
	mu      sync.Mutex
	on      bool
	arrived chan string
	release chan struct{}
}

func (h *hold) start() {
	h.mu.Lock()
	h.on, h.arrived, h.release = true, make(chan string, 16), make(chan struct{})
	h.mu.Unlock()
}

func (h *hold) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	on, arrived, release := h.on, h.arrived, h.release
	h.mu.Unlock()
	if on && r.URL.Path != "/v2/catalog" {
		arrived <- r.URL.Path
		<-release
	}
	h.next.ServeHTTP(w, r)
}

// deadURL is the URL of a loopback port that refuses connections.
func deadURL(t *testing.T) string {
	t.Helper()
	return "http://" + osbtest.DeadAddr(t)
}

const lastOp = "/v2/service_instances/i1/last_operation"

// TestBreakerOpensOnBrokerFailures: three 500s in a row from the sample
// broker open the breaker; calls then get the breaker's answer at once
// (503 for a read, 429 for a provision, Retry-After the rest of open_for
// on the gateway's clock), never reach the broker and take no lock; the
// admin view, the metrics and the audit records say so.
func TestBreakerOpensOnBrokerFailures(t *testing.T) {
	sb, _, url := sampleBroker(t)
	e := newProtectEnv(t, url, "    breaker: {failures: 3, open_for: 1h}")
	_ = sb.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 500, Count: 3})
	for i := range 3 {
		if r := e.send(t, "t1", "GET", lastOp, ""); r.status != 500 {
			t.Fatalf("call %d: %d %s, want the broker's 500", i+1, r.status, r.body)
		}
	}
	if st := e.breakerState(); st != "open" {
		t.Fatalf("after 3 failures the breaker is %s", st)
	}
	e.clock.Advance(10 * time.Minute) // Retry-After counts down on the gateway's clock
	read := e.send(t, "t1", "GET", lastOp, "")
	prov := e.send(t, "t2", "PUT", "/v2/service_instances/i2", syncProvisionBody)
	const last = `broker \"b\" answered instance_last_operation with status 500`
	for _, tc := range []struct {
		name   string
		r      callReply
		status int
	}{{"read", read, 503}, {"provision", prov, 429}} {
		want := `{"description":"broker \"b\" is failing: last error: ` + last + `; after 3 consecutive failed calls the gateway ` +
			`stopped calling it for 1h0m0s (brokers[].breaker); this call was not sent to it, retry after 3000s"}`
		if tc.r.status != tc.status || tc.r.header.Get("Retry-After") != "3000" || strings.TrimSpace(tc.r.body) != want {
			t.Errorf("%s: %d Retry-After %q %s\nwant %d Retry-After 3000 %s", tc.name, tc.r.status, tc.r.header.Get("Retry-After"), tc.r.body, tc.status, want)
		}
	}
	if n := sb.Count("") - sb.Count(samplebroker.EndpointCatalog); n != 3 {
		t.Errorf("the broker got %d calls besides catalog fetches, want only the 3 that failed", n)
	}
	if ls := e.locks(t); len(ls) != 0 {
		t.Errorf("locks after the refusals: %+v", ls)
	}
	row := e.brokerRow(t)
	br, _ := row["breaker"].(map[string]any)
	if br["state"] != "open" || br["transitions"] != 1.0 || br["retry_after_seconds"] != 3000.0 ||
		br["last_error"] != `broker "b" answered instance_last_operation with status 500` || br["failures"] != 3.0 {
		t.Errorf("/admin/brokers breaker: %v", br)
	}
	if _, ok := row["in_flight"]; ok {
		t.Errorf("/admin/brokers counts calls in flight of a broker without a cap: %v", row)
	}
	for series, want := range map[string]string{
		`osb_gateway_breaker_state{broker="b"}`:                         "2",
		`osb_gateway_breaker_transitions_total{broker="b",to="open"}`:   "1",
		`osb_gateway_breaker_transitions_total{broker="b",to="closed"}`: "0",
		`osb_gateway_breaker_refusals_total{broker="b",tenant="t1"}`:    "1",
		`osb_gateway_breaker_refusals_total{broker="b",tenant="t2"}`:    "1",
	} {
		if got := e.metric(t, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
	want := []recordSummary{
		{Tenant: "t1", Endpoint: "instance_last_operation", Status: 500},
		{Tenant: "t1", Endpoint: "instance_last_operation", Status: 500},
		{Tenant: "t1", Endpoint: "instance_last_operation", Status: 500},
		{Tenant: "t1", Endpoint: "instance_last_operation", Status: 503, Protection: ProtectionBreaker},
		{Tenant: "t2", Endpoint: "provision", Status: 429, Protection: ProtectionBreaker},
	}
	waitFor(t, func() bool { return len(e.records()) == len(want) })
	if diff := cmp.Diff(want, e.records(), sortRecords); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
}

// TestBreakerHalfOpenProbesThenCloses: after open_for the breaker lets one
// probe through (probes: 1) and answers the others while it runs; a probe
// that fails opens it again, one that succeeds closes it. open_for is
// short and the test waits for the state, as gobreaker's clock is the
// real one.
func TestBreakerHalfOpenProbesThenCloses(t *testing.T) {
	sb, h, url := sampleBroker(t)
	e := newProtectEnv(t, url, "    breaker: {failures: 2, open_for: 50ms, probes: 1}")
	_ = sb.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 503, Count: 2})
	e.send(t, "t1", "GET", lastOp, "")
	e.send(t, "t1", "GET", lastOp, "")
	waitFor(t, func() bool { return e.breakerState() == "half_open" })

	h.start()
	probe := e.sendInBackground(t, t.Context(), "t1", "GET", lastOp)
	<-h.arrived
	r := e.send(t, "t2", "GET", lastOp, "")
	if r.status != 503 || r.header.Get("Retry-After") != "1" || !strings.Contains(r.body, "probe call(s) through to see whether it recovered") {
		t.Errorf("a call while the probe runs: %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	_ = sb.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 502, Count: 1})
	h.release <- struct{}{}
	if r := await(t, probe); r.status != 502 {
		t.Fatalf("the probe: %d %s, want the broker's 502", r.status, r.body)
	}
	if v := e.metric(t, `osb_gateway_breaker_transitions_total{broker="b",to="open"}`); v != "2" {
		t.Errorf("opened %s times, want 2 (the failed probe opens it again)", v)
	}

	waitFor(t, func() bool { return e.breakerState() == "half_open" })
	probe = e.sendInBackground(t, t.Context(), "t2", "GET", lastOp)
	<-h.arrived
	h.release <- struct{}{}
	if r := await(t, probe); r.status != 404 { // the sample broker has no instance i1: a 4xx, no failure
		t.Fatalf("the second probe: %d %s", r.status, r.body)
	}
	if st := e.breakerState(); st != "closed" {
		t.Fatalf("after a good probe the breaker is %s", st)
	}
	for series, want := range map[string]string{
		`osb_gateway_breaker_state{broker="b"}`:                            "0",
		`osb_gateway_breaker_transitions_total{broker="b",to="half_open"}`: "2",
		`osb_gateway_breaker_transitions_total{broker="b",to="closed"}`:    "1",
	} {
		if got := e.metric(t, series); got != want {
			t.Errorf("%s = %q, want %s", series, got, want)
		}
	}
}

// TestBreakerOpensOnADeadPort: a broker nobody listens for fails every
// call with 502; after two the breaker answers at once, naming the
// connection failure.
func TestBreakerOpensOnADeadPort(t *testing.T) {
	e := newProtectEnv(t, deadURL(t), "    breaker: {failures: 2, open_for: 1h}")
	for range 2 {
		if r := e.send(t, "t1", "GET", lastOp, ""); r.status != 502 {
			t.Fatalf("a call to the dead port: %d %s", r.status, r.body)
		}
	}
	r := e.send(t, "t1", "GET", lastOp, "")
	if r.status != 503 || !strings.Contains(r.body, `broker \"b\" is failing: last error: broker \"b\" could not be reached: it refused the connection`) ||
		strings.Contains(r.body, "127.0.0.1") {
		t.Errorf("after two failures: %d %s", r.status, r.body)
	}
}

// TestProtectionRefusalStatusPerCall: every mutating call the breaker
// refuses gets 429 (a platform retries a 4xx and never undoes it as an
// orphan), every read 503, each with Retry-After; no refusal leaves a lock.
func TestProtectionRefusalStatusPerCall(t *testing.T) {
	e := newProtectEnv(t, deadURL(t), "    breaker: {failures: 1, open_for: 1h}")
	e.send(t, "t1", "GET", lastOp, "") // opens it
	const inst, bind = "/v2/service_instances/i1", "/v2/service_instances/i1/service_bindings/b1"
	query := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	for _, tc := range []struct {
		method, path, body string
		status             int
	}{
		{"PUT", inst, syncProvisionBody, 429},
		{"PATCH", inst, `{"service_id":"` + samplebroker.ServiceID + `"}`, 429},
		{"DELETE", inst + query, "", 429},
		{"PUT", bind, `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `"}`, 429},
		{"DELETE", bind + query, "", 429},
		{"GET", inst, "", 503},
		{"GET", lastOp, "", 503},
		{"GET", bind, "", 503},
		{"GET", bind + "/last_operation", "", 503},
	} {
		r := e.send(t, "t1", tc.method, tc.path, tc.body)
		if r.status != tc.status || r.header.Get("Retry-After") != "3600" || !strings.Contains(r.body, "is failing") {
			t.Errorf("%s %s: %d Retry-After %q %s; want %d from the breaker", tc.method, tc.path, r.status, r.header.Get("Retry-After"), r.body, tc.status)
		}
	}
	if ls := e.locks(t); len(ls) != 0 {
		t.Errorf("locks after the refusals: %+v", ls)
	}
}

// TestBreakerLeavesTheCatalogServedStale: while the breaker is open, the
// catalog is served from the cache, stale once its ttl passed; the
// background refresh, which fails, neither stops that nor moves the
// breaker (the gateway's own broker calls do not pass through it).
func TestBreakerLeavesTheCatalogServedStale(t *testing.T) {
	sb, _, url := sampleBroker(t)
	e := newProtectEnv(t, url, "    breaker: {failures: 1, open_for: 1h}")
	if r := e.send(t, "t1", "GET", "/v2/catalog", ""); r.status != 200 {
		t.Fatalf("catalog: %d %s", r.status, r.body)
	}
	_ = sb.InjectFault(samplebroker.Fault{Status: 500}) // every endpoint, the catalog included
	e.send(t, "t1", "GET", lastOp, "")
	if st := e.breakerState(); st != "open" {
		t.Fatalf("the breaker is %s", st)
	}
	e.clock.Advance(2 * time.Minute) // past the catalog's ttl
	for i := range 2 {
		r := e.send(t, "t2", "GET", "/v2/catalog", "")
		if r.status != 200 || r.header.Get("Warning") == "" {
			t.Errorf("catalog %d while the breaker is open: %d Warning %q %s", i+1, r.status, r.header.Get("Warning"), r.body)
		}
		waitFor(t, func() bool { return sb.Count(samplebroker.EndpointCatalog) >= 2 }) // the refresh went, and failed
	}
	if v := e.metric(t, `osb_gateway_breaker_transitions_total{broker="b",to="open"}`); v != "1" || e.breakerState() != "open" {
		t.Errorf("the refresh moved the breaker: %s transitions to open, state %s", v, e.breakerState())
	}
}

// TestProtectionKeptOverAReload: a reload that leaves the broker's
// settings alone keeps its cap and breaker, open state included; one that
// changes them starts afresh.
func TestProtectionKeptOverAReload(t *testing.T) {
	e := newProtectEnv(t, deadURL(t), "    breaker: {failures: 1, open_for: 1h}\n    max_in_flight: 4")
	e.send(t, "t1", "GET", lastOp, "")
	same, err := New(e.g.cfg, Options{Previous: e.g, Now: e.clock.Now, Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if same.brokerProtect["b"] != e.g.brokerProtect["b"] || same.brokerProtect["b"].Breaker.Status().State != "open" {
		t.Errorf("an unchanged broker's brokerProtection was not kept")
	}
	cfg := *e.g.cfg
	cfg.Brokers = append(cfg.Brokers[:0:0], cfg.Brokers...)
	cfg.Brokers[0].MaxInFlight = 8
	changed, err := New(&cfg, Options{Previous: same, Now: e.clock.Now, Metrics: e.metrics})
	if err != nil {
		t.Fatal(err)
	}
	if p := changed.brokerProtect["b"]; p == same.brokerProtect["b"] || p.Queue.Max != 8 || p.Breaker.Status().State != "closed" {
		t.Errorf("a changed broker's brokerProtection was kept")
	}
}
