// Package telemetry builds the gateway's telemetry from the telemetry
// section of gateway.yaml: an OpenTelemetry tracer provider with the
// configured span exporter and parent-based ratio sampling, and the
// Prometheus registry served as /metrics on the admin listener. Metrics
// are Prometheus client instruments only (proxy.NewMetrics registers them
// there); they are not exported over OTLP. The registry also holds the Go
// runtime and process collectors and target_info, the resource's
// attributes as labels.
//
// Nothing here is global: Setup returns Providers that the caller hands to
// the gateway (proxy.Options.Tracing, proxy.NewMetrics) and shuts down at
// exit.
package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Providers are the process's tracer provider and metrics registry. They are safe
// for concurrent use and live as long as the process: a configuration
// reload does not rebuild them.
type Providers struct {
	// TracerProvider makes the server and client spans. With exporter
	// "none" it still gives every call a trace id (propagated to brokers,
	// written to the audit log) but records nothing.
	TracerProvider trace.TracerProvider
	// Registerer takes the Prometheus collectors served on /metrics (the
	// gateway's instruments); nil when metrics are disabled.
	Registerer prometheus.Registerer
	// Gatherer reads what Registerer took (the operator's console samples
	// it for its charts); nil when metrics are disabled.
	Gatherer prometheus.Gatherer
	// Propagator reads and writes W3C trace context (traceparent,
	// tracestate).
	Propagator propagation.TextMapPropagator
	// Resource describes the process: service.name, service.version,
	// service.instance.id and the configured attributes.
	Resource *resource.Resource

	tp      *sdktrace.TracerProvider
	metrics http.Handler
}

// Option changes how Setup builds the providers.
type Option func(*options)

type options struct {
	exporter sdktrace.SpanExporter
	stdout   io.Writer
	logger   *slog.Logger
}

// WithSpanExporter makes Setup send spans to e, whatever the configured
// exporter says (tests use an in-memory exporter).
func WithSpanExporter(e sdktrace.SpanExporter) Option {
	return func(o *options) { o.exporter = e }
}

// WithStdout sets where the stdout exporter writes; default os.Stdout.
func WithStdout(w io.Writer) Option { return func(o *options) { o.stdout = w } }

// WithLogger makes OpenTelemetry's internal errors (failed exports, say)
// go to log at warn level. It sets the process-wide otel error handler.
func WithLogger(log *slog.Logger) Option { return func(o *options) { o.logger = log } }

// Setup builds the providers for cfg; version is the gateway's version
// (service.version). Exporters connect lazily: an unreachable collector
// does not fail Setup, it shows up as export errors in the log.
func Setup(ctx context.Context, cfg config.Telemetry, version string, opts ...Option) (*Providers, error) {
	o := options{stdout: os.Stdout}
	for _, opt := range opts {
		opt(&o)
	}
	if o.logger != nil {
		log := o.logger
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
			log.Warn("telemetry", slog.String("error", err.Error()))
		}))
	}
	res, err := newResource(ctx, cfg, version)
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	p := &Providers{Resource: res, Propagator: propagation.TraceContext{}}
	if p.tp, err = newTracerProvider(ctx, cfg.Traces, res, o); err != nil {
		return nil, fmt.Errorf("telemetry.traces: %w", err)
	}
	p.TracerProvider = p.tp
	if !cfg.Metrics.On() {
		p.metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			osb.WriteError(w, osb.Errorf(http.StatusNotFound, "", "metrics are disabled (telemetry.metrics.enabled: false)"))
		})
		return p, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		targetInfo(res))
	p.Registerer, p.Gatherer = reg, reg
	p.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	return p, nil
}

// MetricsHandler serves the metrics in the Prometheus text format; mount
// it at GET /metrics on the admin listener. With metrics disabled it
// answers 404.
func (p *Providers) MetricsHandler() http.Handler { return p.metrics }

// Shutdown flushes the spans not exported yet and stops the tracer
// provider; ctx bounds the wait.
func (p *Providers) Shutdown(ctx context.Context) error {
	if p.tp == nil {
		return nil
	}
	return p.tp.Shutdown(ctx)
}

// newResource describes the process. The configured attributes come
// first, so service.* set by the gateway wins over them.
func newResource(ctx context.Context, cfg config.Telemetry, version string) (*resource.Resource, error) {
	name := cfg.ServiceName
	if name == "" {
		name = config.DefaultServiceName
	}
	instance := cfg.InstanceID
	if instance == "" {
		instance = defaultInstanceID()
	}
	kvs := make([]attribute.KeyValue, 0, len(cfg.ResourceAttributes)+3)
	for _, k := range slices.Sorted(maps.Keys(cfg.ResourceAttributes)) {
		kvs = append(kvs, attribute.String(k, cfg.ResourceAttributes[k]))
	}
	kvs = append(kvs, semconv.ServiceName(name), semconv.ServiceVersion(version), semconv.ServiceInstanceID(instance))
	return resource.New(ctx, resource.WithSchemaURL(semconv.SchemaURL), resource.WithTelemetrySDK(),
		resource.WithAttributes(kvs...))
}

// defaultInstanceID is "<hostname>-<pid>".
func defaultInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(os.Getpid())
}
