package proxy

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/rules"
)

// telemetryYAML fronts one sample broker with requests and responses
// enforced.
const telemetryYAML = `
admin: {address: "off"}
brokers:
  - name: strict
    url: ${SAMPLE_URL}
    username: sample
    password: sample-secret
    validation: {requests: enforce, responses: enforce}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: strict}]
`

// Secrets that must never reach spans, metrics or audit records.
const (
	sampleBrokerPass = "sample-secret"
	paramSecret      = "hunter2-param-secret"
)

// brokerRecorder is a sample broker that remembers the traceparent of
// every request it gets.
type brokerRecorder struct {
	mu     sync.Mutex
	parent []string // traceparent per request, in order ("" when absent)
	paths  []string
}

func (b *brokerRecorder) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.parent = append(b.parent, r.Header.Get("Traceparent"))
		b.paths = append(b.paths, r.URL.Path)
		b.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// seen returns the traceparents the broker got for requests to paths
// ending in suffix.
func (b *brokerRecorder) seen(suffix string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for i, p := range b.paths {
		if strings.HasSuffix(p, suffix) {
			out = append(out, b.parent[i])
		}
	}
	return out
}

// stagedGateway serves telemetryYAML in front of a sample broker, built
// with opts (its tracing, metrics and audit parts; Logger defaults to a
// discarding one), on loopback.
func stagedGateway(t *testing.T, opts Options) (*httptest.Server, *Gateway, *brokerRecorder) {
	t.Helper()
	rec := &brokerRecorder{}
	sb := samplebroker.New(samplebroker.Options{Username: "sample", Password: sampleBrokerPass, AsyncDelay: -1})
	bs := httptest.NewServer(rec.wrap(sb))
	t.Cleanup(bs.Close)
	cfg, err := config.Parse([]byte(telemetryYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"SAMPLE_URL": bs.URL}[k], k == "SAMPLE_URL"
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
	return srv, g, rec
}

// call sends one request as tenant t1 at version 2.17 with extra headers
// and returns the status and body.
func call(t *testing.T, gw *httptest.Server, method, path, body string, hdr map[string]string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, gw.URL+"/t1/strict"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("t1-user", "t1-pass")
	req.Header.Set("X-Broker-API-Version", "2.17")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// syncProvision is a provision body for the sample broker's sync plan with
// a secret among its parameters.
func syncProvision() string {
	return provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"small","admin_password":"`+paramSecret+`"}`)
}

// traced returns a recorder and a tracer provider that samples every span.
func traced(t *testing.T) (*tracetest.SpanRecorder, *sdktrace.TracerProvider) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	t.Cleanup(func() { _ = tp.Shutdown(t.Context()) })
	return sr, tp
}

// endedSpans waits until n spans have ended (the server span ends after the
// handler returns, which may be after the client read the answer).
func endedSpans(t *testing.T, sr *tracetest.SpanRecorder, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for {
		spans := sr.Ended()
		if len(spans) >= n || time.Now().After(deadline) {
			return spans
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// byKind returns the spans of kind k.
func byKind(spans []sdktrace.ReadOnlySpan, k trace.SpanKind) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanKind() == k {
			out = append(out, s)
		}
	}
	return out
}

// attrMap renders a span's attributes as strings.
func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

var w3c = propagation.TraceContext{}

// tracedStack serves the scope and trace stages, then inner, in front of
// a handler that answers 200, on loopback: what the trace stage does with
// the Scope the inner stages fill, without a broker.
func tracedStack(t *testing.T, tp trace.TracerProvider, inner Middleware) *httptest.Server {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	srv := httptest.NewServer(Stack(ok, withScope(time.Now), observe.WithTrace(&Tracing{Provider: tp, Propagator: w3c}), inner))
	t.Cleanup(srv.Close)
	return srv
}

func TestTraceServerSpanPerCall(t *testing.T) {
	sr, tp := traced(t)
	gw, _, _ := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp, Propagator: w3c}})
	identity := "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"u-1"}`))
	if st, body := call(t, gw, "PUT", "/v2/service_instances/inst-1", syncProvision(), map[string]string{
		"X-Broker-API-Originating-Identity": identity, "X-B3-TraceId": "b3trace", "X-Vcap-Request-Id": "vcap-1",
		"X-Broker-API-Request-Identity": "req-1"}); st != 201 {
		t.Fatalf("provision: %d %s", st, body)
	}
	if st, _ := call(t, gw, "GET", "/v2/catalog", "", nil); st != 200 {
		t.Fatalf("catalog: %d", st)
	}
	if st, _ := call(t, gw, "GET", "/v2/nothing/here", "", nil); st != 404 {
		t.Fatalf("unknown: %d", st)
	}
	// 5: the provision's server span and client spans (catalog fetch,
	// provision), the catalog's server span (a cache hit), the unknown
	// path's.
	servers := byKind(endedSpans(t, sr, 5), trace.SpanKindServer)
	var names []string
	for _, s := range servers {
		names = append(names, s.Name())
	}
	if diff := cmp.Diff([]string{"osb provision", "osb catalog", "osb unknown"}, names); diff != "" {
		t.Fatalf("server span names (-want +got):\n%s", diff)
	}
	want := map[string]string{
		"http.request.method": "PUT", "http.response.status_code": "201", "url.scheme": "http",
		"http.route": "/t1/strict/v2/service_instances/{instance_id}", "url.path": "/t1/strict/v2/service_instances/{instance_id}",
		"server.address": "127.0.0.1", "server.port": gwPort(t, gw),
		"osb.endpoint": "provision", "osb.outcome": OutcomeForwarded, "osb.request_id": "req-1",
		"osb.tenant": "t1", "osb.broker": "strict", "osb.instance_id": "inst-1",
		"osb.service_id": samplebroker.ServiceID, "osb.plan_id": samplebroker.PlanSyncID,
		"osb.api_version": "2.17", "osb.broker_api_version": "2.17", "osb.accepts_incomplete": "false",
		"osb.b3.trace_id": "b3trace", "cloudfoundry.vcap_request_id": "vcap-1",
	}
	if diff := cmp.Diff(want, attrMap(servers[0])); diff != "" {
		t.Errorf("provision span attributes (-want +got):\n%s", diff)
	}
	if got := attrMap(servers[2]); got["osb.outcome"] != OutcomeRejected || got["http.response.status_code"] != "404" || got["http.route"] != "" {
		t.Errorf("unknown path span: %v", got)
	}
}

// TestTraceRefusedCallNamedByEndpoint: a call refused before it was
// classified (a wrong password, no version header) is named and routed by
// the endpoint its path has the shape of, not "osb unknown".
func TestTraceRefusedCallNamedByEndpoint(t *testing.T) {
	sr, tp := traced(t)
	gw, _, _ := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp, Propagator: w3c}})
	if st, _ := call(t, gw, "PUT", "/v2/service_instances/inst-1", syncProvision(), map[string]string{"Authorization": "Basic dDE6d3Jvbmc="}); st != 401 {
		t.Fatalf("wrong password: %d", st)
	}
	if st, _ := call(t, gw, "GET", "/v2/service_instances/inst-1/last_operation", "", map[string]string{"X-Broker-API-Version": ""}); st != 412 {
		t.Fatalf("no version: %d", st)
	}
	var got []string
	for _, s := range byKind(endedSpans(t, sr, 2), trace.SpanKindServer) {
		a := attrMap(s)
		got = append(got, s.Name()+" "+a["http.response.status_code"]+" "+a["http.route"]+" "+a["osb.endpoint"])
	}
	want := []string{
		"osb provision 401 /t1/strict/v2/service_instances/{instance_id} provision",
		"osb instance_last_operation 412 /t1/strict/v2/service_instances/{instance_id}/last_operation instance_last_operation",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused calls' spans (-want +got):\n%s", diff)
	}
}

// TestTraceClientSpanCarriesTraceparent: each broker call of a platform
// call, the catalog fetch its validation needs included, is a client span
// under the call's server span, and the broker gets that client span's
// traceparent.
func TestTraceClientSpanCarriesTraceparent(t *testing.T) {
	sr, tp := traced(t)
	gw, _, broker := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp, Propagator: w3c}})
	if st, body := call(t, gw, "PUT", "/v2/service_instances/inst-2", syncProvision(), nil); st != 201 {
		t.Fatalf("provision: %d %s", st, body)
	}
	spans := endedSpans(t, sr, 3)
	server, client := byKind(spans, trace.SpanKindServer), byKind(spans, trace.SpanKindClient)
	if len(server) != 1 || len(client) != 2 {
		t.Fatalf("got %d server and %d client spans, want 1 and 2 (the catalog fetch, the provision)", len(server), len(client))
	}
	for i, tc := range []struct{ name, path string }{{"broker catalog", "/v2/catalog"}, {"broker provision", "/inst-2"}} {
		c := client[i]
		if c.Name() != tc.name || c.Parent().SpanID() != server[0].SpanContext().SpanID() {
			t.Errorf("client span %q, parent %s; want %q, child of the server span %s",
				c.Name(), c.Parent().SpanID(), tc.name, server[0].SpanContext().SpanID())
		}
		if got := attrMap(c)["osb.broker"]; got != "strict" {
			t.Errorf("%s: osb.broker %q", tc.name, got)
		}
		seen := broker.seen(tc.path)
		if len(seen) != 1 {
			t.Fatalf("broker saw %d calls to %s", len(seen), tc.path)
		}
		sc, ok := core.ParseTraceParent(seen[0])
		if !ok {
			t.Fatalf("broker got traceparent %q", seen[0])
		}
		if sc.TraceID() != server[0].SpanContext().TraceID() || sc.SpanID() != c.SpanContext().SpanID() {
			t.Errorf("%s: broker got traceparent %s; want trace %s, parent %s (the client span)", tc.path, seen[0],
				server[0].SpanContext().TraceID(), c.SpanContext().SpanID())
		}
	}
}

func TestTraceContinuesIncomingTraceparent(t *testing.T) {
	sr, tp := traced(t)
	var before string // Scope.TraceParent as inner stages see it on the way in
	peek := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			before = ScopeOf(w, r).TraceParent
			next.ServeHTTP(w, r)
		})
	}
	gw := tracedStack(t, tp, peek)
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	if st, _ := call(t, gw, "GET", "/v2/catalog", "", map[string]string{"Traceparent": incoming}); st != 200 {
		t.Fatalf("catalog: %d", st)
	}
	s := byKind(endedSpans(t, sr, 1), trace.SpanKindServer)[0]
	if got := s.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("trace id %s, want the platform's", got)
	}
	if got := s.Parent().SpanID().String(); got != "00f067aa0ba902b7" || !s.Parent().IsRemote() {
		t.Errorf("parent %s (remote %v), want the platform's span", got, s.Parent().IsRemote())
	}
	if want := core.FormatTraceParent(s.SpanContext()); before != want {
		t.Errorf("Scope.TraceParent before the inner stages = %q, want %q", before, want)
	}
}

func TestTraceLinksToStartingSpan(t *testing.T) {
	sr, tp := traced(t)
	const starter = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	startedBy := func(next http.Handler) http.Handler { // stands in for classify and the guard on a poll
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ScopeOf(w, r).Call = rules.Call{Endpoint: rules.InstanceLastOperation, InstanceID: "inst-3"}
			next.ServeHTTP(w, r)
			ScopeOf(w, r).StartedBy = starter
		})
	}
	gw := tracedStack(t, tp, startedBy)
	path := fmt.Sprintf("/v2/service_instances/inst-3/last_operation?service_id=%s&plan_id=%s", samplebroker.ServiceID, samplebroker.PlanAsyncID)
	call(t, gw, "GET", path, "", nil)
	s := byKind(endedSpans(t, sr, 1), trace.SpanKindServer)[0]
	if s.Name() != "osb instance_last_operation" {
		t.Errorf("span name %q", s.Name())
	}
	links := s.Links()
	if len(links) != 1 || core.FormatTraceParent(links[0].SpanContext) != starter {
		t.Fatalf("links %+v, want one to %s", links, starter)
	}
	if diff := cmp.Diff([]attribute.KeyValue{attribute.String("osb.link", "started_by")}, links[0].Attributes,
		cmp.Comparer(func(a, b attribute.Value) bool { return a == b })); diff != "" {
		t.Errorf("link attributes (-want +got):\n%s", diff)
	}
}

// TestTraceNeverRecordsSecrets sends credentials, a secret parameter, a
// bind (whose answer holds credentials) and a refused provision whose
// description quotes a parameter value; no span holds any of them.
func TestTraceNeverRecordsSecrets(t *testing.T) {
	sr, tp := traced(t)
	gw, _, _ := stagedGateway(t, Options{Tracing: &Tracing{Provider: tp, Propagator: w3c}})
	call(t, gw, "PUT", "/v2/service_instances/inst-4", syncProvision(), nil)
	_, bound := call(t, gw, "PUT", "/v2/service_instances/inst-4/service_bindings/b-1",
		fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, samplebroker.ServiceID, samplebroker.PlanSyncID), nil)
	credPass := bindingPassword(t, bound)
	refused := provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"`+paramSecret+`"}`)
	if st, body := call(t, gw, "PUT", "/v2/service_instances/inst-5", refused, nil); st != 400 || !strings.Contains(body, paramSecret) {
		t.Fatalf("refused provision: %d %s (the platform sees its own value)", st, body)
	}
	for _, s := range endedSpans(t, sr, 6) { // provision 3 (with the catalog fetch), bind 2, refused 1
		text := s.Name()
		for _, kv := range s.Attributes() {
			text += " " + string(kv.Key) + "=" + kv.Value.String()
		}
		for _, e := range s.Events() {
			text += " " + e.Name
			for _, kv := range e.Attributes {
				text += " " + kv.Value.String()
			}
		}
		text += " " + s.Status().Description
		for _, secret := range []string{sampleBrokerPass, "t1-pass", "Basic ", paramSecret, credPass, "admin_password"} {
			if strings.Contains(text, secret) {
				t.Errorf("span %q holds %q: %s", s.Name(), secret, text)
			}
		}
	}
}

// bindingPassword returns credentials.password of a bind answer.
func bindingPassword(t *testing.T, body string) string {
	t.Helper()
	var b struct {
		Credentials struct {
			Password string `json:"password"`
		} `json:"credentials"`
	}
	if err := json.Unmarshal([]byte(body), &b); err != nil || b.Credentials.Password == "" {
		t.Fatalf("bind answer without credentials.password: %s", body)
	}
	return b.Credentials.Password
}

// gwPort is the port of gw's URL, as a span attribute shows it.
func gwPort(t *testing.T, gw *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(gw.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}
