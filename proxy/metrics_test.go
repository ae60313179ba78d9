package proxy

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/sony/gobreaker/v2"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/rules"
)

// scrape fetches the Prometheus text from a metrics handler over loopback.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	return osbtest.Scrape(t, h)
}

func TestMetricsSeries(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	m, err := NewMetrics(p.Registerer, nil)
	if err != nil {
		t.Fatal(err)
	}
	var g *Gateway
	m.ObserveCatalogs(func() map[string]CatalogCounts { return g.Catalogs().Counts() })
	var stateErr error // set after the first scrape: the store goes down
	stateReads := 0
	m.ObserveState(func(context.Context) (StateCount, error) {
		stateReads++
		return StateCount{Locks: 3, Operations: 1, Oldest: time.Now().Add(-time.Minute)}, stateErr
	})
	gw, g, _ := stagedGateway(t, Options{Metrics: m})

	call(t, gw, "GET", "/v2/catalog", "", nil)
	call(t, gw, "GET", "/v2/catalog", "", nil)
	call(t, gw, "PUT", "/v2/service_instances/inst-m1", syncProvision(), nil)
	call(t, gw, "PUT", "/v2/service_instances/inst-m2", provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"huge"}`), nil)
	call(t, gw, "GET", "/v2/nothing", "", nil)
	// Refused before the classify stage: still counted by endpoint.
	call(t, gw, "PUT", "/v2/service_instances/inst-m3", syncProvision(), map[string]string{"Authorization": "Basic dDE6d3Jvbmc="})
	call(t, gw, "GET", "/v2/service_instances/inst-m3/last_operation", "", map[string]string{"X-Broker-API-Version": ""})
	m.AuditWriteError()
	m.StoreError("lock")

	text := scrape(t, p.MetricsHandler())
	for _, want := range []string{
		`osb_gateway_requests_total{broker="strict",code="200",endpoint="catalog",tenant="t1"} 2`,
		`osb_gateway_requests_total{broker="strict",code="201",endpoint="provision",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",code="400",endpoint="provision",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",code="404",endpoint="unknown",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",code="401",endpoint="provision",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",code="412",endpoint="instance_last_operation",tenant="t1"} 1`,
		// Zero from the start, though nothing was blocked, queued or polled.
		`osb_gateway_blocked_total{broker="strict",endpoint="deprovision",tenant="t1"} 0`,
		`osb_gateway_orphan_candidates_total{broker="strict",decision="queued"} 0`,
		`osb_gateway_catalog_unavailable_total{broker="strict",decision="refused"} 0`,
		`osb_gateway_polls_total{answer="forwarded",broker="strict"} 0`,
		`osb_gateway_orphan_mitigations_total{broker="strict",result="failed"} 0`,
		`osb_gateway_store_errors_total{op="acquire"} 0`,
		`osb_gateway_lock_oldest_age_seconds `,
		`osb_gateway_request_duration_seconds_count{broker="strict",code="201",endpoint="provision",tenant="t1"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="strict",endpoint="provision",status_class="2xx"} 1`,
		// The catalog fetch the first call needed: metered like a proxied call.
		`osb_gateway_broker_duration_seconds_count{broker="strict",endpoint="catalog",status_class="2xx"} 1`,
		`osb_gateway_findings_total{broker="strict",direction="request",rule="request.parameters.schema"} 1`,
		`osb_gateway_catalog_misses_total{broker="strict"} 1`,
		`osb_gateway_catalog_hits_total{broker="strict"}`,
		"osb_gateway_locks_held 3\n",
		"osb_gateway_operations_in_progress 1\n",
		`osb_gateway_store_errors_total{op="lock"} 1`,
		"osb_gateway_audit_write_errors_total 1\n",
		"osb_gateway_requests_in_flight 0\n",
		// Zero from the start for every route, though nothing was shed.
		`osb_gateway_shed_total{broker="strict",class="mutations",tenant="t1"} 0`,
		`osb_gateway_shed_total{broker="strict",class="reads",tenant="t1"} 0`,
		`target_info{`,
		// Zero from the start for every broker and drift kind.
		`osb_gateway_catalog_drift{broker="strict",kind="plan_removed"} 0`,
		"# TYPE osb_gateway_catalog_stale_total counter",
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// Bounded labels: no ids, no paths, only the label names the gateway chose.
	for _, bad := range []string{"inst-m1", "inst-m2", "/v2/", samplebroker.ServiceID, "nothing"} {
		if strings.Contains(text, bad) {
			t.Errorf("/metrics holds %q", bad)
		}
	}
	labels := regexp.MustCompile(`(?m)^osb_gateway_[a-z_]+\{([^}]*)\}`)
	allowed := map[string]bool{"tenant": true, "broker": true, "endpoint": true, "status_class": true, "code": true, "rule": true,
		"direction": true, "decision": true, "op": true, "answer": true, "result": true, "le": true, "class": true, "limit": true,
		"kind": true} // kind: one of rules.DriftKinds
	for _, m := range labels.FindAllStringSubmatch(text, -1) {
		for _, pair := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(m[1], -1) {
			if !allowed[pair[1]] {
				t.Errorf("unexpected label %q in %s", pair[1], m[0])
			}
		}
	}
	// One read of the store per scrape; a store that fails is counted and
	// shows no stale gauges.
	if stateReads != 1 {
		t.Errorf("the store was read %d times for one scrape, want 1", stateReads)
	}
	stateErr = errors.New("store down")
	text = scrape(t, p.MetricsHandler())
	if !strings.Contains(text, `osb_gateway_store_errors_total{op="observe"} 1`) || strings.Contains(text, "osb_gateway_locks_held 3") {
		t.Errorf("a failed store read is not counted or its gauges stay:\n%s", text)
	}
}

func TestMetricsDisabled(t *testing.T) {
	off := false
	p, err := telemetry.Setup(t.Context(), config.Telemetry{Metrics: config.Metrics{Enabled: &off}}, "test")
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 404 {
		t.Errorf("/metrics with metrics disabled: %d, want 404", w.Code)
	}
	var nilMetrics *Metrics // every method is safe on nil
	nilMetrics.AuditWriteError()
	nilMetrics.StoreError("lock")
	nilMetrics.BrokerCall("b", rules.Catalog, "2xx", 0)
	nilMetrics.ObserveCatalogs(nil)
	nilMetrics.ObserveState(nil)
	if observe.WithMetrics(nilMetrics) != nil {
		t.Error("nil Metrics has a stage")
	}
	if rt := nilMetrics.Transport(http.DefaultTransport); rt != http.DefaultTransport {
		t.Error("nil Metrics wraps the transport")
	}
}

// gathered returns the series of family name whose labels include want.
func gathered(t *testing.T, g prometheus.Gatherer, name string, want map[string]string) []*dto.Metric {
	t.Helper()
	out, err := matching(g, name, want)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestMetricsCachedSeries drives the cached request and broker series
// directly: repeated calls land on one series, a sampled span becomes the
// exemplar (as the OpenTelemetry exporter did), an unsampled one does not,
// and a broker call is timed once, until its body is first closed.
func TestMetricsCachedSeries(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	clock := time.Unix(1000, 0)
	m, err := NewMetrics(p.Registerer, func() time.Time { return clock })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(p.Registerer, nil); err == nil {
		t.Error("second NewMetrics on one registry: no error")
	}
	g := p.Registerer.(prometheus.Gatherer)

	sampled := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	unsampled := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{3}, SpanID: trace.SpanID{4}}))
	scope := func(tenant string, status int) *Scope {
		// TraceParent set, as the trace stage sets it for every call
		// while tracing is on (record looks a span up only then).
		return &Scope{Start: clock.Add(-20 * time.Millisecond), Tenant: tenant, Broker: "b",
			Call: rules.Call{Endpoint: rules.Provision}, Status: status, TraceParent: "00-traced"}
	}
	m.Record(unsampled, scope("t1", 201), "PUT")
	m.Record(sampled, scope("t1", 201), "PUT")
	m.Record(unsampled, scope("t2", 201), "PUT")
	m.Record(unsampled, scope("t1", 999), "PUT")
	blocked := scope("t1", 422)
	blocked.Blocked, blocked.Orphan = true, "deprovision"
	blocked.Findings = []Finding{{Direction: "request", Violation: rules.Violation{Rule: "r1"}}, {Direction: "request", Violation: rules.Violation{Rule: "r1"}}}
	m.Record(sampled, blocked, "PUT")

	reqs := gathered(t, g, "osb_gateway_requests_total", map[string]string{"tenant": "t1", "code": "201"})
	if len(reqs) != 1 || reqs[0].GetCounter().GetValue() != 2 {
		t.Fatalf("requests t1 2xx: %v", reqs)
	}
	ex := reqs[0].GetCounter().GetExemplar()
	exLabels := map[string]string{}
	for _, l := range ex.GetLabel() {
		exLabels[l.GetName()] = l.GetValue()
	}
	if exLabels["trace_id"] != (trace.TraceID{1}).String() || exLabels["span_id"] != (trace.SpanID{2}).String() {
		t.Errorf("request exemplar %v, want the sampled span's ids", exLabels)
	}
	for _, tc := range []struct {
		labels map[string]string
		n      float64
	}{
		{map[string]string{"tenant": "t2", "code": "201"}, 1},
		{map[string]string{"tenant": "t1", "code": "other"}, 1},
		{map[string]string{"tenant": "t1", "code": "422", "endpoint": "provision"}, 1},
	} {
		got := gathered(t, g, "osb_gateway_requests_total", tc.labels)
		if len(got) != 1 || got[0].GetCounter().GetValue() != tc.n {
			t.Errorf("requests %v: %v, want %v", tc.labels, got, tc.n)
		}
		if tc.labels["tenant"] == "t2" && got[0].GetCounter().GetExemplar() != nil {
			t.Errorf("exemplar from an unsampled span: %v", got[0].GetCounter().GetExemplar())
		}
	}
	hist := gathered(t, g, "osb_gateway_request_duration_seconds", map[string]string{"tenant": "t1", "code": "201"})
	if len(hist) != 1 || hist[0].GetHistogram().GetSampleCount() != 2 || hist[0].GetHistogram().GetSampleSum() != 0.04 {
		t.Fatalf("duration t1 2xx: %v", hist)
	}
	var exemplars int
	for _, b := range hist[0].GetHistogram().GetBucket() {
		if b.GetExemplar() != nil {
			exemplars++
		}
	}
	if exemplars != 1 {
		t.Errorf("duration exemplars: %d, want 1", exemplars)
	}
	// A series takes a new exemplar at most once a second.
	exemplarTrace := func() string {
		t.Helper()
		got := gathered(t, g, "osb_gateway_requests_total", map[string]string{"tenant": "t1", "code": "201"})
		for _, l := range got[0].GetCounter().GetExemplar().GetLabel() {
			if l.GetName() == "trace_id" {
				return l.GetValue()
			}
		}
		return ""
	}
	later := trace.ContextWithSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{5}, SpanID: trace.SpanID{6}, TraceFlags: trace.FlagsSampled}))
	clock = clock.Add(500 * time.Millisecond)
	m.Record(later, scope("t1", 201), "PUT")
	if got := exemplarTrace(); got != (trace.TraceID{1}).String() {
		t.Errorf("exemplar replaced within a second: %s", got)
	}
	clock = clock.Add(600 * time.Millisecond)
	m.Record(later, scope("t1", 201), "PUT")
	if got := exemplarTrace(); got != (trace.TraceID{5}).String() {
		t.Errorf("exemplar after a second: %s, want the newer trace", got)
	}
	if got := gathered(t, g, "osb_gateway_requests_total", map[string]string{"tenant": "t1", "code": "201"}); got[0].GetCounter().GetValue() != 4 {
		t.Errorf("requests t1 2xx: %v, want 4", got[0].GetCounter().GetValue())
	}
	if got := gathered(t, g, "osb_gateway_blocked_total", map[string]string{"tenant": "t1", "broker": "b", "endpoint": "provision"}); len(got) != 1 || got[0].GetCounter().GetValue() != 1 {
		t.Errorf("blocked: %v", got)
	}
	if got := gathered(t, g, "osb_gateway_findings_total", map[string]string{"broker": "b", "rule": "r1", "direction": "request"}); len(got) != 1 || got[0].GetCounter().GetValue() != 2 {
		t.Errorf("findings: %v", got)
	}
	if got := gathered(t, g, "osb_gateway_orphan_candidates_total", map[string]string{"broker": "b", "decision": "deprovision"}); len(got) != 1 || got[0].GetCounter().GetValue() != 1 {
		t.Errorf("orphans: %v", got)
	}

	// Broker calls: timed from the round trip until the body is first
	// closed; no answer counts as "error"; endpoints outside the table are
	// "unknown".
	rt := m.Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		clock = clock.Add(5 * time.Millisecond)
		if r.Method == "DELETE" {
			return nil, errors.New("refused")
		}
		return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
	}))
	ctx := core.ContextWith(t.Context(), &Scope{Broker: "b", Call: rules.Call{Endpoint: rules.Catalog}})
	res, err := rt.RoundTrip(httptest.NewRequestWithContext(ctx, "GET", "http://broker/v2/catalog", nil))
	if err != nil {
		t.Fatal(err)
	}
	clock = clock.Add(10 * time.Millisecond)
	_ = res.Body.Close()
	clock = clock.Add(time.Second)
	_ = res.Body.Close()
	if _, err := rt.RoundTrip(httptest.NewRequestWithContext(ctx, "DELETE", "http://broker/v2/catalog", nil)); err == nil {
		t.Fatal("no error")
	}
	m.BrokerCall("b", rules.Endpoint(200), "error", time.Second)
	m.BrokerCall("b", rules.Catalog, "weird", time.Second)
	for _, tc := range []struct {
		labels map[string]string
		n      uint64
		sum    float64
	}{
		{map[string]string{"endpoint": "catalog", "status_class": "2xx"}, 1, 0.015},
		{map[string]string{"endpoint": "catalog", "status_class": "error"}, 1, 0.005},
		{map[string]string{"endpoint": "unknown", "status_class": "error"}, 1, 1},
		{map[string]string{"endpoint": "catalog", "status_class": "weird"}, 1, 1},
	} {
		got := gathered(t, g, "osb_gateway_broker_duration_seconds", tc.labels)
		if len(got) != 1 || got[0].GetHistogram().GetSampleCount() != tc.n || got[0].GetHistogram().GetSampleSum() != tc.sum {
			t.Errorf("broker %v: %v, want count %d sum %v", tc.labels, got, tc.n, tc.sum)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestOutcome(t *testing.T) {
	tests := []struct {
		name  string
		scope Scope
		want  string
	}{
		{"broker answered", Scope{Status: 201}, OutcomeForwarded},
		{"broker's own error passes through", Scope{Status: 500}, OutcomeForwarded},
		{"blocked", Scope{Blocked: true, Err: osb.Errorf(400, "", "busy")}, OutcomeBlocked},
		{"from cache", Scope{FromCache: true}, OutcomeFromCache},
		{"refused by a rule", Scope{Err: osb.Errorf(422, "", "bad")}, OutcomeRejected},
		{"broker answer refused", Scope{Err: &osb.Error{Status: 502, Err: &core.ResponseRefused{}}}, OutcomeRejected},
		{"broker unreachable", Scope{Err: osb.Errorf(502, "", "unreachable")}, OutcomeFailed},
		{"platform went away", Scope{Err: fmt.Errorf("gone: %w", context.Canceled), Status: StatusClientClosed}, OutcomeFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.scope.Outcome(); got != tc.want {
				t.Errorf("Outcome() = %q, want %q", got, tc.want)
			}
		})
	}
}

// BenchmarkMetricsStage is the metrics stage and transport around one
// broker call with a canned answer; on − nil is the instruments' cost per
// call.
func BenchmarkMetricsStage(b *testing.B) {
	p, err := telemetry.Setup(b.Context(), config.Telemetry{}, "bench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	on, err := NewMetrics(p.Registerer, nil)
	if err != nil {
		b.Fatal(err)
	}
	sampled := trace.ContextWithSpanContext(b.Context(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled}))
	for _, tc := range []struct {
		name string
		m    *Metrics
		ctx  context.Context
	}{{"on", on, b.Context()}, {"sampled", on, sampled}, {"nil", nil, b.Context()}} {
		b.Run(tc.name, func(b *testing.B) {
			answer := http.Response{StatusCode: 200, Body: http.NoBody}
			rt := tc.m.Transport(roundTripFunc(func(*http.Request) (*http.Response, error) {
				res := answer
				return &res, nil
			}))
			s := &Scope{Tenant: "t1", Broker: "b1", Call: rules.Call{Endpoint: rules.InstanceLastOperation}}
			h := Stack(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				res, err := rt.RoundTrip(r)
				if err != nil {
					b.Fatal(err)
				}
				_ = res.Body.Close()
				s.Status = 200
			}), observe.WithMetrics(tc.m))
			r := httptest.NewRequestWithContext(core.ContextWith(tc.ctx, s), "GET", "/v2/catalog", nil)
			b.ReportAllocs()
			for b.Loop() {
				s.Start = time.Now()
				h.ServeHTTP(nil, r)
			}
		})
	}
}

// TestMetricsExposition: metric names, types, help texts and labels are an
// operator contract. testdata/metrics.golden is the /metrics page (less
// the Go runtime and process collectors, lines sorted) of one call of
// every kind on a fixed clock, as the gateway served it when half of its
// instruments were OpenTelemetry ones behind the Prometheus exporter; the
// page must stay the same on the Prometheus client alone.
func TestMetricsExposition(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{InstanceID: "i-1"}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	now := time.Unix(1000, 0)
	m, err := NewMetrics(p.Registerer, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	cache, err := catalog.NewCache(config.Catalog{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	cache.StatsFor("b").Hits.Add(1)
	m.ObserveCatalogs(func() map[string]CatalogCounts { return cache.Counts() })
	m.ObserveState(func(context.Context) (StateCount, error) { return StateCount{Locks: 1, Operations: 1}, nil })
	m.ObserveExpiring(func(context.Context) (map[string]int, error) { return map[string]int{"b": 1}, nil })
	m.Record(context.Background(), &Scope{Start: now, Tenant: "t", Broker: "b", Call: rules.Call{Endpoint: rules.Provision},
		Status: 400, Blocked: true, Findings: []Finding{{Direction: "request", Violation: rules.Violation{Rule: "r"}}},
		Orphan: "queued", CatalogUnavailable: "refused"}, "PUT")
	m.Start(&config.Config{Brokers: []config.Broker{{Name: "b"}},
		Tenants: []config.Tenant{{Name: "t", Routes: []config.Route{{Broker: "b"}}}}})
	m.SetBuildInfo("v1.2.3", "abc123", "go1.99")
	m.Mitigation("b", guard.MitigationFail)
	m.ObserveBrokers(func() map[string]bool { return map[string]bool{"b": false} })
	m.ObserveCertificates(func() []CertExpiry {
		return []CertExpiry{{Use: "broker", Broker: "b", Cert: &x509.Certificate{
			Subject: pkix.Name{CommonName: "gateway-client"}, NotAfter: time.Unix(2000000000, 0)}}}
	})
	m.Poll("b", emulate.ShieldShared)
	m.BrokerCall("b", rules.Provision, "2xx", 1)
	m.BrokerProtectStart("b", []string{"t"}, true, true, gobreaker.StateClosed)
	m.QueueWaited("t", "b", 2*time.Millisecond, true)
	m.BreakerRefused("t", "b")
	m.BreakerChanged("b", gobreaker.StateOpen)
	m.StoreError("lock")
	m.AuditWriteError()
	m.LimitedCounter("t", "b", core.ClassMutations, "tenant").Inc()
	m.ShedCounter("t", "b", core.ClassReads).Inc()

	var lines []string
	sdk := regexp.MustCompile(`telemetry_sdk_version="[^"]*"`)
	for _, l := range strings.Split(scrape(t, p.MetricsHandler()), "\n") {
		if l == "" || strings.HasPrefix(l, "go_") || strings.HasPrefix(l, "process_") ||
			strings.Contains(l, " go_") || strings.Contains(l, " process_") {
			continue
		}
		lines = append(lines, sdk.ReplaceAllString(l, `telemetry_sdk_version="*"`))
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.Join("testdata", "metrics.golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("/metrics differs from %s (-want +got):\n%s", path, diff)
	}
}
