package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/rules"
)

// scrape fetches the Prometheus text from a metrics handler over loopback.
func scrape(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	res, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("/metrics: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	return string(b)
}

func TestMetricsSeries(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	m, err := NewMetrics(p.MeterProvider, nil)
	if err != nil {
		t.Fatal(err)
	}
	var g *Gateway
	if err := m.ObserveCatalogs(func() *CatalogCache { return g.Catalogs() }); err != nil {
		t.Fatal(err)
	}
	if err := m.ObserveState(func(context.Context) (int64, error) { return 3, nil },
		func(context.Context) (int64, error) { return 0, errors.New("store down") }); err != nil {
		t.Fatal(err)
	}
	gw, g, _ := stagedGateway(t, m.Transport, m.Stage())

	call(t, gw, "GET", "/v2/catalog", "", nil)
	call(t, gw, "GET", "/v2/catalog", "", nil)
	call(t, gw, "PUT", "/v2/service_instances/inst-m1", syncProvision(), nil)
	call(t, gw, "PUT", "/v2/service_instances/inst-m2", provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"huge"}`), nil)
	call(t, gw, "GET", "/v2/nothing", "", nil)
	m.AuditWriteError()
	m.StoreError("lock")

	text := scrape(t, p.MetricsHandler())
	for _, want := range []string{
		`osb_gateway_requests_total{broker="strict",endpoint="catalog",status_class="2xx",tenant="t1"} 2`,
		`osb_gateway_requests_total{broker="strict",endpoint="provision",status_class="2xx",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",endpoint="provision",status_class="4xx",tenant="t1"} 1`,
		`osb_gateway_requests_total{broker="strict",endpoint="unknown",status_class="4xx",tenant="t1"} 1`,
		`osb_gateway_request_duration_seconds_count{broker="strict",endpoint="provision",status_class="2xx",tenant="t1"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="strict",endpoint="provision",status_class="2xx"} 1`,
		`osb_gateway_findings_total{broker="strict",direction="request",rule="request.parameters.schema"} 1`,
		`osb_gateway_catalog_misses_total{broker="strict"} 1`,
		`osb_gateway_catalog_hits_total{broker="strict"}`,
		"osb_gateway_locks_held 3\n",
		`osb_gateway_store_errors_total{op="lock"} 1`,
		`osb_gateway_store_errors_total{op="observe"} 1`,
		"osb_gateway_audit_write_errors_total 1\n",
		"osb_gateway_requests_in_flight 0\n",
		`target_info{`,
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
	allowed := map[string]bool{"tenant": true, "broker": true, "endpoint": true, "status_class": true, "rule": true,
		"direction": true, "decision": true, "op": true, "le": true}
	for _, m := range labels.FindAllStringSubmatch(text, -1) {
		for _, pair := range regexp.MustCompile(`([a-z_]+)="`).FindAllStringSubmatch(m[1], -1) {
			if !allowed[pair[1]] {
				t.Errorf("unexpected label %q in %s", pair[1], m[0])
			}
		}
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
	if h := nilMetrics.Stage()(http.NotFoundHandler()); h == nil {
		t.Error("nil Metrics stage is nil")
	}
}

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
		{"broker answer refused", Scope{Err: &osb.Error{Status: 502, Err: &responseRefused{}}}, OutcomeRejected},
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
