package telemetry

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is a minimal OTLP/HTTP collector: it takes protobuf
// ExportTraceServiceRequests at POST /v1/traces and keeps them.
type otlpReceiver struct {
	mu       sync.Mutex
	requests []*collectortrace.ExportTraceServiceRequest
	problems []string
}

func (rc *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if r.Method != http.MethodPost || r.URL.Path != otlpTracesPath {
		rc.problems = append(rc.problems, r.Method+" "+r.URL.Path)
		http.NotFound(w, r)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		rc.problems = append(rc.problems, "Content-Type "+ct)
	}
	body, err := io.ReadAll(r.Body)
	req := &collectortrace.ExportTraceServiceRequest{}
	if err == nil {
		err = proto.Unmarshal(body, req)
	}
	if err != nil {
		rc.problems = append(rc.problems, "body: "+err.Error())
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	rc.requests = append(rc.requests, req)
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// spans returns the received span names and each resource's service.name.
func (rc *otlpReceiver) spans() (names, services []string, problems []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for _, req := range rc.requests {
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
	}
	return names, services, slices.Clone(rc.problems)
}

// TestOTLPHTTPExport sends spans to a real OTLP/HTTP receiver on loopback:
// Shutdown flushes them, and they arrive as protobuf at /v1/traces with
// their names and the configured service.name.
func TestOTLPHTTPExport(t *testing.T) {
	rc := &otlpReceiver{}
	collector := httptest.NewServer(rc)
	defer collector.Close()
	p, err := Setup(t.Context(), configured(t, `
  service_name: gw-otlp
  traces: {exporter: otlp_http, endpoint: "`+collector.URL+`", sample_ratio: 1}
`), "dev")
	if err != nil {
		t.Fatal(err)
	}
	tracer := p.TracerProvider.Tracer("test")
	ctx, parent := tracer.Start(t.Context(), "osb provision")
	_, child := tracer.Start(ctx, "broker provision")
	child.End()
	parent.End()
	_, other := tracer.Start(t.Context(), "osb catalog")
	other.End()
	if err := p.Shutdown(t.Context()); err != nil {
		t.Fatalf("shutdown (flush to the receiver): %v", err)
	}
	names, services, problems := rc.spans()
	if len(problems) > 0 {
		t.Errorf("receiver problems: %q", problems)
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"broker provision", "osb catalog", "osb provision"}, names); diff != "" {
		t.Errorf("received spans (-want +got):\n%s", diff)
	}
	if len(services) == 0 {
		t.Error("no resource with service.name received")
	}
	for _, s := range services {
		if s != "gw-otlp" {
			t.Errorf("service.name = %q, want gw-otlp", s)
		}
	}
}
