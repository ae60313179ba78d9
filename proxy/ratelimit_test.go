package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/protect"
)

// limitsYAML: tenant t1 may make 3 mutating calls at once, then 2 per
// second, and 3 reads at once, then 1 per second, over both its routes;
// its route to b1 also limits reads to 2 at once, then 0.5 per second.
// Tenant t2 has no limit. READ_RATE, when set, replaces t1's read rate.
const limitsYAML = `
admin: {address: "off"}
brokers:
  - name: b1
    url: ${B1_URL}
    validation: {without_catalog: forward}
  - name: b2
    url: ${B2_URL}
    validation: {without_catalog: forward}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    limits:
      mutations: {rate: 2, burst: 3}
      reads: {rate: 1, burst: 3}
    routes:
      - broker: b1
        limits: {reads: {rate: 0.5, burst: 2}}
      - broker: b2
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes: [{broker: b1}]
`

// limitsEnv is a gateway serving limitsYAML (or another configuration) on
// an injected clock, with its metrics, audit records and log kept.
type limitsEnv struct {
	g       *Gateway
	gw      *httptest.Server
	b1, b2  *osbtest.Broker
	clock   *osbtest.Clock
	reg     *prometheus.Registry
	records *auditRecorder
	log     *osbtest.Buffer
}

func newLimitsEnv(t *testing.T, yaml string, b1, b2 http.HandlerFunc) *limitsEnv {
	t.Helper()
	e := &limitsEnv{b1: osbtest.NewBroker(t, b1), b2: osbtest.NewBroker(t, b2),
		clock: osbtest.NewClock(time.Unix(1_800_000_000, 0)), reg: prometheus.NewRegistry(),
		records: &auditRecorder{}, log: &osbtest.Buffer{}}
	m, err := NewMetrics(e.reg, e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	e.g, e.gw = gatewayWith(t, yaml, map[string]string{"B1_URL": e.b1.URL, "B2_URL": e.b2.URL}, Options{
		Now: e.clock.Now, Metrics: m, Audit: &AuditOptions{Writer: e.records},
		Logger: slog.New(slog.NewJSONHandler(e.log, nil))})
	return e
}

// deprovision sends a deprovision of instance id as tenant to broker b1.
func (e *limitsEnv) deprovision(t *testing.T, tenant, id string) (*http.Response, string) {
	t.Helper()
	return do(t, "DELETE", e.gw.URL+"/"+tenant+"/b1/v2/service_instances/"+id+"?service_id=s&plan_id=p",
		tenant+"-user", tenant+"-pass", "2.16", nil)
}

// poll sends a last_operation poll as t1 to broker b.
func (e *limitsEnv) poll(t *testing.T, b string) (*http.Response, string) {
	t.Helper()
	return do(t, "GET", e.gw.URL+"/t1/"+b+"/v2/service_instances/i1/last_operation", "t1-user", "t1-pass", "2.16", nil)
}

// auditRecorder keeps the audit records written.
type auditRecorder struct {
	mu   sync.Mutex
	recs []audit.Record
}

func (a *auditRecorder) Write(r *audit.Record) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.recs = append(a.recs, *r)
	return nil
}

func (a *auditRecorder) all() []audit.Record {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]audit.Record(nil), a.recs...)
}

// counter is the value of the one series of family name with labels.
func counter(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	ms := gathered(t, reg, name, labels)
	if len(ms) != 1 {
		t.Fatalf("%s%v: %d series, want 1", name, labels, len(ms))
	}
	return ms[0].GetCounter().GetValue()
}

// TestRateLimitBurstThenSteadyRate: t1's mutations limit (3 at once, then
// 2 per second) admits a burst of 3, then one call every 500 ms, on the
// injected clock; what it refuses never reaches the broker; the tenant
// without limits is not touched by t1's.
func TestRateLimitBurstThenSteadyRate(t *testing.T) {
	e := newLimitsEnv(t, limitsYAML, nil, nil)
	n := 0
	step := func(advance time.Duration, want ...int) {
		t.Helper()
		e.clock.Advance(advance)
		for _, status := range want {
			n++
			res, body := e.deprovision(t, "t1", fmt.Sprintf("i-%d", n))
			if res.StatusCode != status {
				t.Fatalf("call %d after %s: %d %s, want %d", n, advance, res.StatusCode, body, status)
			}
			if status == http.StatusTooManyRequests && res.Header.Get("Retry-After") != "1" {
				t.Errorf("call %d: Retry-After %q, want 1", n, res.Header.Get("Retry-After"))
			}
		}
	}
	step(0, 200, 200, 200, 429)         // the burst
	step(499*time.Millisecond, 429)     // half a token short of one
	step(time.Millisecond, 200, 429)    // one token every 500 ms
	step(time.Second, 200, 200, 429)    // two a second
	step(10*time.Second, 200, 200, 200) // idle: the bucket refills to its burst, not beyond
	step(0, 429)
	if got := len(e.b1.Requests()); got != 9 {
		t.Errorf("the broker saw %d calls, want the 9 admitted", got)
	}
	for i := range 10 {
		if res, body := e.deprovision(t, "t2", fmt.Sprintf("t2-%d", i)); res.StatusCode != 200 {
			t.Fatalf("t2, without limits: %d %s", res.StatusCode, body)
		}
	}
	if got := counter(t, e.reg, "osb_gateway_rate_limited_total", map[string]string{"tenant": "t1", "broker": "b1",
		"class": "mutations", "limit": "tenant"}); got != 5 {
		t.Errorf("rate_limited_total = %v, want 5", got)
	}
}

// TestRateLimitRetryAfter: Retry-After is the time until the bucket has a
// token, in whole seconds rounded up.
func TestRateLimitRetryAfter(t *testing.T) {
	yaml := strings.Replace(limitsYAML, "reads: {rate: 1, burst: 3}", "reads: {rate: 0.25, burst: 1}", 1)
	e := newLimitsEnv(t, yaml, nil, nil)
	if res, body := e.poll(t, "b2"); res.StatusCode != 200 {
		t.Fatalf("first poll: %d %s", res.StatusCode, body)
	}
	for _, row := range []struct {
		advance time.Duration
		want    string // Retry-After; "": admitted
	}{
		{0, "4"},                       // one read per 4 s
		{1500 * time.Millisecond, "3"}, // 2.5 s left
		{2400 * time.Millisecond, "1"}, // 100 ms left
		{99 * time.Millisecond, "1"},   // 1 ms left
		{time.Millisecond, ""},
		{0, "4"},
	} {
		e.clock.Advance(row.advance)
		res, body := e.poll(t, "b2")
		got := res.Header.Get("Retry-After")
		if row.want == "" && res.StatusCode != 200 || row.want != "" && (res.StatusCode != 429 || got != row.want) {
			t.Errorf("after %s: %d, Retry-After %q (%s); want Retry-After %q", row.advance, res.StatusCode, got, body, row.want)
		}
	}
}

func TestRetryAfterSecs(t *testing.T) {
	for _, row := range []struct {
		d    time.Duration
		want int64
	}{{0, 1}, {time.Nanosecond, 1}, {time.Second, 1}, {time.Second + time.Nanosecond, 2}, {2500 * time.Millisecond, 3}, {time.Hour, 3600}} {
		if got := core.RetryAfterSecs(row.d); got != row.want {
			t.Errorf("core.RetryAfterSecs(%s) = %d, want %d", row.d, got, row.want)
		}
	}
}

// TestRateLimitTenantAndRoute: a call is under its route's limit and its
// tenant's; the route's is checked first, and a call the tenant's limit
// refuses gives the route's token back. The answer names the limit that
// refused, and the audit record and access line say a rate limit
// answered.
func TestRateLimitTenantAndRoute(t *testing.T) {
	e := newLimitsEnv(t, limitsYAML, nil, nil)
	expect := func(b string, status int, desc string) {
		t.Helper()
		res, body := e.poll(t, b)
		if res.StatusCode != status {
			t.Fatalf("poll to %s: %d %s, want %d", b, res.StatusCode, body, status)
		}
		if status != 429 {
			return
		}
		if diff := cmp.Diff(`{"description":"`+desc+`"}`+"\n", body); diff != "" {
			t.Errorf("refusal body (-want +got):\n%s", diff)
		}
		if ct := res.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("Content-Type %q", ct)
		}
	}
	const byTenant = `rate limit: tenant \"t1\" may make 1 reads per second (burst 3), on each gateway replica ` +
		`(tenants[].limits.reads); this call was not sent to the broker; retry after 1s`
	const byRoute = `rate limit: tenant \"t1\" to broker \"b1\" may make 0.5 reads per second (burst 2), on each gateway ` +
		`replica (tenants[].routes[].limits.reads); this call was not sent to the broker; retry after 1s`
	expect("b2", 200, "") // tenant: 2 left
	expect("b2", 200, "") // 1 left
	expect("b1", 200, "") // route: 1 left; tenant: 0
	expect("b1", 429, byTenant)
	e.clock.Advance(time.Second) // tenant: 1; route: 1 (given back) + 0.5
	expect("b1", 200, "")        // route 0.5, tenant 0: without the token given back, the route would refuse
	expect("b1", 429, byRoute)   // the route refuses first: the tenant's bucket is not touched
	if got, want := len(e.b1.Requests())+len(e.b2.Requests()), 4; got != want {
		t.Errorf("the brokers saw %d calls, want %d", got, want)
	}
	for _, limit := range []string{"tenant", "route"} {
		if got := counter(t, e.reg, "osb_gateway_rate_limited_total", map[string]string{"tenant": "t1", "broker": "b1",
			"class": "reads", "limit": limit}); got != 1 {
			t.Errorf("rate_limited_total{limit=%q} = %v, want 1", limit, got)
		}
	}
	// Zero from the start: every limit a route is under, and none other.
	for _, l := range []map[string]string{
		{"tenant": "t1", "broker": "b2", "class": "reads", "limit": "tenant"},
		{"tenant": "t1", "broker": "b2", "class": "mutations", "limit": "tenant"},
		{"tenant": "t1", "broker": "b1", "class": "mutations", "limit": "tenant"},
	} {
		if got := counter(t, e.reg, "osb_gateway_rate_limited_total", l); got != 0 {
			t.Errorf("rate_limited_total%v = %v, want 0", l, got)
		}
	}
	for _, l := range []map[string]string{{"broker": "b2", "limit": "route"}, {"tenant": "t2"}} {
		if ms := gathered(t, e.reg, "osb_gateway_rate_limited_total", l); len(ms) != 0 {
			t.Errorf("rate_limited_total%v: %d series of a limit that is not configured", l, len(ms))
		}
	}
	var limited []string
	for _, r := range e.records.all() {
		if r.Protection != "" {
			limited = append(limited, r.Protection+" "+r.Outcome+" "+fmt.Sprint(r.Status))
		}
	}
	if diff := cmp.Diff([]string{"rate_limit rejected 429", "rate_limit rejected 429"}, limited); diff != "" {
		t.Errorf("audit records of limited calls (-want +got):\n%s", diff)
	}
	if got := strings.Count(e.log.String(), `"protection":"rate_limit"`); got != 2 {
		t.Errorf("%d access lines say protection rate_limit, want 2:\n%s", got, e.log.String())
	}
}

// TestRateLimitsCarriedOverReload: a reload that keeps a limit's settings
// keeps its bucket (a reload does not refill it); one that changes them
// starts a new one.
func TestRateLimitsCarriedOverReload(t *testing.T) {
	e := newLimitsEnv(t, limitsYAML, nil, nil)
	for i := range 3 {
		if res, _ := e.deprovision(t, "t1", fmt.Sprint(i)); res.StatusCode != 200 {
			t.Fatalf("call %d: %d", i, res.StatusCode)
		}
	}
	reload := func(yaml string) *Gateway {
		t.Helper()
		cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) {
			return map[string]string{"B1_URL": e.b1.URL, "B2_URL": e.b2.URL}[k], true
		}})
		if err != nil {
			t.Fatal(err)
		}
		g, err := New(cfg, Options{Previous: e.g, Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	same := reload(limitsYAML)
	changed := reload(strings.Replace(limitsYAML, "mutations: {rate: 2, burst: 3}", "mutations: {rate: 2, burst: 4}", 1))
	for _, row := range []struct {
		name string
		g    *Gateway
		want int
	}{{"same settings", same, 429}, {"new burst", changed, 200}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("DELETE", "/t1/b1/v2/service_instances/x?service_id=s&plan_id=p", nil)
		req.SetBasicAuth("t1-user", "t1-pass")
		req.Header.Set("X-Broker-API-Version", "2.16")
		row.g.ServeHTTP(rec, req)
		if rec.Code != row.want {
			t.Errorf("%s: %d %s, want %d", row.name, rec.Code, rec.Body, row.want)
		}
	}
}

// TestRateLimitsOffLeaveTheStageOut: without limits in the
// configuration, the chain has no rate-limit stage.
func TestRateLimitsOffLeaveTheStageOut(t *testing.T) {
	g, _ := testGateway(t, twoTenantYAML, env("http://127.0.0.1:1", "http://127.0.0.1:1"))
	if protect.WithRateLimit(g.protect) != nil || g.protect.Limiters() != 0 {
		t.Error("a configuration without limits has a rate-limit stage")
	}
}
