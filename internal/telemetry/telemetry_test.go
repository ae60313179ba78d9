package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// configured returns the telemetry section of a minimal gateway.yaml with
// the given telemetry block, defaults applied and checked.
func configured(t *testing.T, block string) config.Telemetry {
	t.Helper()
	cfg, err := config.Parse([]byte(`
brokers: [{name: b, url: "http://127.0.0.1:1"}]
tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
telemetry:
`+block), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg.Telemetry
}

func TestResource(t *testing.T) {
	p, err := Setup(t.Context(), configured(t, `
  service_name: gw-eu
  instance_id: gw-eu-1
  resource_attributes: {deployment.environment: prod}
`), "1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(context.Background())
	got := map[string]string{}
	for _, kv := range p.Resource.Attributes() {
		got[string(kv.Key)] = kv.Value.String()
	}
	for k, want := range map[string]string{"service.name": "gw-eu", "service.version": "1.2.3",
		"service.instance.id": "gw-eu-1", "deployment.environment": "prod", "telemetry.sdk.language": "go"} {
		if got[k] != want {
			t.Errorf("resource %s = %q, want %q", k, got[k], want)
		}
	}
	d, _ := Setup(t.Context(), configured(t, " {}"), "dev")
	defer d.Shutdown(context.Background())
	for _, kv := range d.Resource.Attributes() {
		if kv.Key == "service.instance.id" && !strings.Contains(kv.Value.String(), "-") {
			t.Errorf("default instance id %q, want <hostname>-<pid>", kv.Value.String())
		}
	}
}

// TestStdoutExporter checks the stdout exporter end to end: a span made
// through the providers comes out as JSON at Shutdown.
func TestStdoutExporter(t *testing.T) {
	var out osbtest.Buffer
	p, err := Setup(t.Context(), configured(t, "\n  traces: {exporter: stdout}\n"), "dev", WithStdout(&out))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(t.Context(), "osb catalog")
	span.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var exported struct{ Name string }
	if err := json.NewDecoder(strings.NewReader(out.String())).Decode(&exported); err != nil || exported.Name != "osb catalog" {
		t.Errorf("stdout exporter wrote %q (%v)", out.String(), err)
	}
}

func TestSampling(t *testing.T) {
	sampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	unsampled := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"
	tests := []struct {
		name, block, parent string
		recording           bool
	}{
		{"none: new traces get ids but are not recorded", " {}", "", false},
		{"none: a sampled platform trace is followed", " {}", sampled, true},
		{"ratio 0: new traces are dropped", "\n  traces: {exporter: stdout, sample_ratio: 0}\n", "", false},
		{"ratio 0: a sampled platform trace is followed", "\n  traces: {exporter: stdout, sample_ratio: 0}\n", sampled, true},
		{"ratio 1: a platform's unsampled decision is kept", "\n  traces: {exporter: stdout}\n", unsampled, false},
		{"ratio 1: new traces are recorded", "\n  traces: {exporter: stdout}\n", "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Setup(t.Context(), configured(t, tc.block), "dev", WithStdout(io.Discard))
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			ctx := t.Context()
			if tc.parent != "" {
				ctx = p.Propagator.Extract(ctx, propagation.MapCarrier{"traceparent": tc.parent})
			}
			_, span := p.TracerProvider.Tracer("test").Start(ctx, "s", trace.WithSpanKind(trace.SpanKindServer))
			defer span.End()
			if !span.SpanContext().IsValid() || span.IsRecording() != tc.recording {
				t.Errorf("span valid %v, recording %v; want valid, recording %v", span.SpanContext().IsValid(), span.IsRecording(), tc.recording)
			}
		})
	}
}

func TestInjectedExporterAndMetricsHandler(t *testing.T) {
	exp := keptSpans{tracetest.NewInMemoryExporter()}
	p, err := Setup(t.Context(), configured(t, " {}"), "dev", WithSpanExporter(exp))
	if err != nil {
		t.Fatal(err)
	}
	_, span := p.TracerProvider.Tracer("test").Start(t.Context(), "osb provision")
	span.End()
	// Collectors on Registerer share the page with the runtime's and
	// target_info.
	native := prometheus.NewCounter(prometheus.CounterOpts{Name: "osb_gateway_test_native_total", Help: "Test."})
	p.Registerer.MustRegister(native)
	native.Add(3)
	srv := httptest.NewServer(p.MetricsHandler())
	defer srv.Close()
	res, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	// go_gc_gogc_percent and go_gc_gomemlimit_bytes show what the
	// runtime.* policy set (docs/performance.md: Memory and GC).
	for _, want := range []string{"osb_gateway_test_native_total 3", "go_goroutines ", "process_cpu_seconds_total ",
		"go_gc_gogc_percent ", "go_gc_gomemlimit_bytes ",
		`target_info{service_instance_id="`, `service_name="osb-gateway",service_version="dev",telemetry_sdk_language="go",telemetry_sdk_name="opentelemetry",telemetry_sdk_version="`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, body)
		}
	}
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range exp.GetSpans() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"osb provision"}, names); diff != "" {
		t.Errorf("exported spans (-want +got):\n%s", diff)
	}
}

func TestOTLPExportersBuildWithoutACollector(t *testing.T) {
	for _, block := range []string{
		"\n  traces: {exporter: otlp_grpc, endpoint: \"127.0.0.1:1\", insecure: true, headers: {x-api-key: k}}\n",
		"\n  traces: {exporter: otlp_http, endpoint: \"http://127.0.0.1:1\"}\n",
	} {
		p, err := Setup(t.Context(), configured(t, block), "dev")
		if err != nil {
			t.Fatalf("%s: %v", block, err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		cancel() // nothing to wait for: no spans were made
		_ = p.Shutdown(ctx)
	}
	if got := httpTracesURL("https://collector:4318"); got != "https://collector:4318/v1/traces" {
		t.Errorf("httpTracesURL = %q", got)
	}
	if got := httpTracesURL("https://collector:4318/custom/path"); got != "https://collector:4318/custom/path" {
		t.Errorf("httpTracesURL kept path = %q", got)
	}
}

// keptSpans is an in-memory exporter whose spans survive Shutdown.
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

var _ sdktrace.SpanExporter = keptSpans{}

func TestMetricsDisabledHasNoRegisterer(t *testing.T) {
	p, err := Setup(t.Context(), configured(t, " {metrics: {enabled: false}}"), "dev")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(t.Context())
	if p.Registerer != nil {
		t.Errorf("Registerer with metrics disabled: %v", p.Registerer)
	}
	w := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	want := `{"description":"metrics are disabled (telemetry.metrics.enabled: false)"}` + "\n"
	if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != want {
		t.Errorf("/metrics with metrics disabled: %d %s %q, want 404 application/json %q", w.Code, w.Header().Get("Content-Type"), w.Body.String(), want)
	}
}

// TestTargetInfo: target_info carries the resource's attributes as labels
// named as the OpenTelemetry Prometheus exporter named them (this line is
// what that exporter wrote for the same resource before the gateway's
// metrics moved to the Prometheus client alone).
func TestTargetInfo(t *testing.T) {
	p, err := Setup(t.Context(), configured(t, `
  instance_id: i-1
  resource_attributes: {deployment.environment: prod, "1st.key": one, "a.b": x, "a_b": y, "a..b": z, "k-8s": v, "ünï": u, "__x": w}
`), "dev")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Shutdown(t.Context())
	sdk, _ := p.Resource.Set().Value("telemetry.sdk.version")
	w := httptest.NewRecorder()
	p.MetricsHandler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	want := `target_info{_n_="u",_x="w",a_b="x;y;z",deployment_environment="prod",k_8s="v",key_1st_key="one",` +
		`service_instance_id="i-1",service_name="osb-gateway",service_version="dev",telemetry_sdk_language="go",` +
		`telemetry_sdk_name="opentelemetry",telemetry_sdk_version="` + sdk.String() + `"} 1` + "\n"
	if got := w.Body.String(); !strings.Contains(got, "# HELP target_info Target metadata\n# TYPE target_info gauge\n"+want) {
		t.Errorf("/metrics lacks\n%s\ngot:\n%s", want, got)
	}
}
