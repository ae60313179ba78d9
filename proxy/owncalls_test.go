package proxy

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// TestOwnBrokerCallsTracedAndMetered: the broker calls the gateway makes
// itself — a catalog fetch (the warm-up's, in the background) and an
// orphan mitigation's DELETE — go through the same transport as proxied
// calls: each is timed in osb_gateway_broker_duration_seconds by broker
// and endpoint, and is a client span named by its endpoint, the root of
// a trace of its own (no platform call stands behind it).
func TestOwnBrokerCallsTracedAndMetered(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	m, err := NewMetrics(p.Registerer, nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, tp := traced(t)
	g, gw, broker, _ := orphanEnvWith(t, "mitigate", nil, Options{Metrics: m, Tracing: &Tracing{Provider: tp}})
	ctx := context.Background()

	if err := g.WarmCatalogs(ctx); err != nil {
		t.Fatal(err)
	}
	_ = broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 500, Body: `{}`, Count: 1})
	if res, _ := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i500", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanSyncID, ""))); res.StatusCode != 500 {
		t.Fatalf("provision: %d", res.StatusCode)
	}
	g.MitigateOrphans(ctx) // due at once: the DELETE; the instance never existed (410)
	if n := broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Fatalf("%d deprovisions reached the broker, want the mitigation's 1", n)
	}

	text := scrape(t, p.MetricsHandler())
	for _, want := range []string{
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="catalog",status_class="2xx"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="provision",status_class="5xx"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="deprovision",status_class="4xx"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	spans := endedSpans(t, sr, 4) // client catalog, server and client provision, client deprovision
	var server trace.SpanContext
	for _, s := range byKind(spans, trace.SpanKindServer) {
		server = s.SpanContext()
	}
	clients := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range byKind(spans, trace.SpanKindClient) {
		clients[s.Name()] = s
	}
	for _, tc := range []struct {
		name   string
		parent trace.SpanContext // zero: a root span
	}{
		{"broker catalog", trace.SpanContext{}},
		{"broker provision", server},
		{"broker deprovision", trace.SpanContext{}},
	} {
		s, ok := clients[tc.name]
		if !ok {
			t.Errorf("no client span %q among %d spans", tc.name, len(spans))
			continue
		}
		if s.Parent().SpanID() != tc.parent.SpanID() {
			t.Errorf("%s: parent %s, want %s", tc.name, s.Parent().SpanID(), tc.parent.SpanID())
		}
		if got := attrMap(s)["osb.broker"]; got != "b" {
			t.Errorf("%s: osb.broker %q, want b", tc.name, got)
		}
	}
}

// TestOwnCallFollowsThePlatformCallsSampling: the catalog fetch a platform
// call needs continues that call's trace: under a call that is not
// sampled no client span is recorded, and the broker still gets the
// call's trace id (as it does for the proxied call itself).
func TestOwnCallFollowsThePlatformCallsSampling(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.AlwaysSample())))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	gw, _, broker := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp}})
	const unsampled = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	if st, body := call(t, gw, "GET", "/v2/catalog", "", map[string]string{"Traceparent": unsampled}); st != 200 {
		t.Fatalf("catalog: %d %s", st, body)
	}
	if n := len(sr.Ended()); n != 0 {
		t.Errorf("%d spans recorded under an unsampled platform call", n)
	}
	seen := broker.seen("/v2/catalog")
	if len(seen) != 1 {
		t.Fatalf("broker saw %d catalog fetches", len(seen))
	}
	sc, ok := core.ParseTraceParent(seen[0])
	if !ok || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || sc.IsSampled() {
		t.Errorf("the catalog fetch carried traceparent %q; want the platform's trace, not sampled", seen[0])
	}
}
