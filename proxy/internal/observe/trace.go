// Package observe is the observation stages: the trace stage (a server span
// per platform call, and Tracing.Transport, the client span of each broker
// call), the metrics stage, the audit stage (one record per call), the
// access log stage and the recovery of a panicking stage. They sit outside
// the others and read the Scope after the inner stages return, so they see
// every answer. It imports the core and the metrics and access log
// services, and no other stage.
package observe

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// instrumentationName names the gateway's tracer.
const instrumentationName = "github.com/osb-gateway/osb-gateway/proxy"

// maxAttrLen caps the header values and broker operations recorded on
// spans: they come from outside and may be long (an operation may hold
// 10,000 characters).
const maxAttrLen = 256

// correlationHeaders are request headers recorded as span attributes when
// present: other tracing systems' ids and Cloud Foundry's request id, so a
// gateway span can be found from a platform's log line.
var correlationHeaders = [...]struct {
	header string
	key    attribute.Key
}{
	{"X-B3-Traceid", "osb.b3.trace_id"},
	{"X-B3-Spanid", "osb.b3.span_id"},
	{"X-B3-Parentspanid", "osb.b3.parent_span_id"},
	{"X-B3-Sampled", "osb.b3.sampled"},
	{"B3", "osb.b3"},
	{"X-Vcap-Request-Id", "cloudfoundry.vcap_request_id"},
}

// Tracing is what the gateway traces with (Options.Tracing).
type Tracing struct {
	// Provider makes the server and client spans; required.
	Provider trace.TracerProvider
	// Propagator reads the platform's trace context and writes the
	// broker's; nil: W3C trace context (propagation.TraceContext).
	Propagator propagation.TextMapPropagator
}

// propagator returns t's propagator, W3C trace context when unset.
func (t *Tracing) propagator() propagation.TextMapPropagator {
	if t.Propagator == nil {
		return propagation.TraceContext{}
	}
	return t.Propagator
}

// WithTrace is the trace stage: one server span per platform call,
// continuing the platform's W3C traceparent. The span is started before the
// inner stages run, and its traceparent stored in Scope.TraceParent; after
// they return it is named by the endpoint ("osb provision", "osb unknown":
// never the path) and given the Scope's attributes (tenant, broker,
// endpoint, ids, version, status, operation, outcome), a link to
// Scope.StartedBy when set, and an error status for a 5xx answer. Headers,
// bodies, parameters and credentials are never recorded. A nil t leaves
// the stage out (nil Middleware).
func WithTrace(t *Tracing) core.Middleware {
	if t == nil {
		return nil
	}
	tracer := t.Provider.Tracer(instrumentationName)
	prop := t.propagator()
	serverKind := trace.WithSpanKind(trace.SpanKindServer) // built once: an option is an allocation
	_, w3cOnly := prop.(propagation.TraceContext)
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if s == nil {
				next.ServeHTTP(w, r)
				return
			}
			ctx := r.Context()
			if _, ok := r.Header["Traceparent"]; ok || !w3cOnly {
				ctx = prop.Extract(ctx, propagation.HeaderCarrier(r.Header))
			}
			ctx, span := tracer.Start(ctx, "osb unknown", serverKind)
			s.TraceParent = core.FormatTraceParent(span.SpanContext())
			if !span.IsRecording() {
				// Not sampled: nothing is recorded and no child span is
				// made (the broker transport makes none under a span that
				// does not record), so the request keeps its context; the
				// trace context reaches the broker and the logs through
				// Scope.TraceParent.
				next.ServeHTTP(w, r)
				span.End()
				return
			}
			defer func() {
				finishServerSpan(span, s, r)
				span.End()
			}()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// finishServerSpan names the span and records what the Scope learnt:
// the HTTP attributes of OpenTelemetry's semantic conventions
// (http.request.method, http.route and url.path with the ids templated,
// url.scheme, http.response.status_code, server.address, server.port)
// beside the gateway's osb.* ones.
func finishServerSpan(span trace.Span, s *core.Scope, r *http.Request) {
	endpoint := s.LabelEndpoint(r.Method)
	ep := endpoint.String()
	span.SetName("osb " + ep)
	status := s.StatusSent()
	attrs := make([]attribute.KeyValue, 0, 32)
	attrs = append(attrs,
		semconv.HTTPRequestMethodKey.String(requestMethod(r.Method)),
		semconv.HTTPResponseStatusCode(status),
		semconv.URLScheme(urlScheme(r)),
		attribute.String("osb.endpoint", ep),
		attribute.String("osb.outcome", s.Outcome()),
		attribute.String("osb.request_id", truncate(s.RequestID)),
	)
	if r.Method != requestMethod(r.Method) {
		attrs = append(attrs, semconv.HTTPRequestMethodOriginal(truncate(r.Method)))
	}
	if tmpl := endpoint.Template(); tmpl != "" && s.Route != nil {
		route := s.Route.Prefix + tmpl
		attrs = append(attrs, semconv.HTTPRoute(route), semconv.URLPath(route))
	} else {
		// No OSB endpoint (a 404, a 405): no ids of an operation to
		// template; the path as it came, capped.
		attrs = append(attrs, semconv.URLPath(truncate(r.URL.Path)))
	}
	if host, port := serverAddress(r); host != "" {
		attrs = append(attrs, semconv.ServerAddress(truncate(host)))
		if port > 0 {
			attrs = append(attrs, semconv.ServerPort(port))
		}
	}
	add := func(k attribute.Key, v string) {
		if v != "" {
			attrs = append(attrs, k.String(truncate(v)))
		}
	}
	add("osb.tenant", s.Tenant)
	add("osb.broker", s.Broker)
	add("osb.instance_id", s.Call.InstanceID)
	add("osb.binding_id", s.Call.BindingID)
	service, plan := s.ServiceAndPlan()
	add("osb.service_id", service)
	add("osb.plan_id", plan)
	if !s.Version.IsZero() {
		attrs = append(attrs, attribute.String("osb.api_version", s.Version.String()))
	}
	add("osb.broker_api_version", s.Forward)
	if s.Call.Endpoint.Instance() {
		attrs = append(attrs, attribute.Bool("osb.accepts_incomplete", s.Call.AcceptsIncomplete))
	}
	add("osb.operation", s.Operation)
	add("osb.orphan_mitigation", s.Orphan)
	add("osb.poll_shield", s.Shield)
	for _, c := range correlationHeaders {
		if v := r.Header[c.header]; len(v) > 0 {
			add(c.key, v[0])
		}
	}
	span.SetAttributes(attrs...)
	if s.StartedBy != "" {
		if sc, ok := core.ParseTraceParent(s.StartedBy); ok {
			span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{
				attribute.String("osb.link", "started_by")}})
		}
	}
	if status >= 500 {
		attrs := []attribute.KeyValue{attribute.String("error.type", strconv.Itoa(status))}
		span.SetAttributes(attrs...)
		span.SetStatus(codes.Error, errorDescription(s.Err))
	}
}

// knownMethods are the methods http.request.method names as they are;
// others are "_OTHER", as the semantic conventions ask (the method as sent
// goes to http.request.method_original).
var knownMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

// requestMethod is the http.request.method value of method.
func requestMethod(method string) string {
	for _, m := range knownMethods {
		if m == method {
			return m
		}
	}
	return "_OTHER"
}

// urlScheme is the scheme the request came over.
func urlScheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// serverAddress splits the Host the platform addressed into the
// server.address and server.port of the semantic conventions (port 0:
// none given).
func serverAddress(r *http.Request) (string, int) {
	host, port, err := net.SplitHostPort(r.Host)
	if err != nil {
		return strings.Trim(r.Host, "[]"), 0
	}
	n, _ := strconv.Atoi(port)
	return host, n
}

// errorDescription is the description of the gateway's OSB error, which
// never carries secrets; "" for other errors, whose detail may name
// addresses and stays in the log.
func errorDescription(err error) string {
	var e *osb.Error
	if errors.As(err, &e) {
		return e.Description
	}
	return ""
}

// truncate caps s at maxAttrLen bytes.
func truncate(s string) string { return core.TruncateTo(s, maxAttrLen) }

// Transport wraps a broker Transport so that every broker call gets a
// client span named by the endpoint ("broker provision"), and carries the
// span's W3C traceparent to the broker. A proxied call's span is a child
// of the request's server span; a call the gateway makes on its own
// (catalog fetch, orphan mitigation) is a child of the span of the
// platform call it serves, or, in the background, the root of a trace of
// its own. The span ends when the response body is closed. The request is
// not modified: headers are copied before the traceparent is set. A nil t
// returns rt.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if t == nil {
		return rt
	}
	return &tracingTransport{rt: rt, tracer: t.Provider.Tracer(instrumentationName), prop: t.propagator()}
}

type tracingTransport struct {
	rt     http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

// RoundTrip implements http.RoundTripper.
func (t *tracingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	s := core.ScopeFrom(req.Context())
	if !trace.SpanFromContext(req.Context()).IsRecording() && (s == nil || !s.Own) {
		// A proxied call that is not sampled: no client span is exported,
		// so the broker gets the server span's traceparent, which the
		// upstream stage already set.
		return t.rt.RoundTrip(req)
	}
	name, broker := "broker unknown", ""
	if s != nil {
		name, broker = "broker "+s.Call.Endpoint.String(), s.Broker
	}
	ctx, span := t.tracer.Start(req.Context(), name, trace.WithSpanKind(trace.SpanKindClient))
	out := withTraceContext(req, ctx, t.prop)
	if !span.IsRecording() {
		// The gateway's own call, left out by the sampler (or under a
		// platform call that is not sampled): nothing is recorded, and the
		// broker still gets the trace context.
		span.End()
		return t.rt.RoundTrip(out)
	}
	span.SetAttributes(
		semconv.HTTPRequestMethodKey.String(requestMethod(req.Method)),
		semconv.ServerAddress(req.URL.Hostname()),
		attribute.String("osb.broker", broker),
	)
	if s != nil && s.Own { // marked as the gateway's own call, and who asked for it (proxy/internal/guard/reconcile.go)
		span.SetAttributes(attribute.String("osb.origin", core.OriginGateway))
		if who := core.OperatorFrom(req.Context()); who != "" {
			span.SetAttributes(attribute.String("osb.operator", who))
		}
	}
	if s != nil {
		if tmpl := s.Call.Endpoint.Template(); tmpl != "" {
			span.SetAttributes(semconv.URLTemplate(tmpl))
		}
	}
	if p := req.URL.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			span.SetAttributes(semconv.ServerPort(n))
		}
	}
	res, err := t.rt.RoundTrip(out)
	if err != nil {
		span.SetStatus(codes.Error, "broker call failed")
		span.RecordError(err)
		span.End()
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(res.StatusCode))
	if res.StatusCode >= 500 {
		span.SetStatus(codes.Error, "")
	}
	res.Body = &spanBody{ReadCloser: res.Body, span: span}
	return res, nil
}

// withTraceContext returns req with ctx and ctx's trace context in a copy
// of its headers.
func withTraceContext(req *http.Request, ctx context.Context, prop propagation.TextMapPropagator) *http.Request {
	out := req.WithContext(ctx)
	out.Header = make(http.Header, len(req.Header)+1)
	for k, v := range req.Header {
		out.Header[k] = v // shared, never appended to: Inject replaces the slice it sets
	}
	prop.Inject(ctx, propagation.HeaderCarrier(out.Header))
	return out
}

// spanBody ends a client span when the response body is closed.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

// Close implements io.Closer and ends the span.
func (b *spanBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}
