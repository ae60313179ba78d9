package telemetry

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// otlpTracesPath is where an OTLP/HTTP collector takes spans.
const otlpTracesPath = "/v1/traces"

// newTracerProvider builds the tracer provider: parent-based sampling (a
// platform's sampled traceparent is followed, new traces are kept at the
// configured ratio) and a batching span processor for the exporter. With
// exporter "none" nothing is recorded unless the platform's trace is
// sampled, and nothing is exported; trace ids are still made and
// propagated.
func newTracerProvider(ctx context.Context, tc config.Traces, res *resource.Resource, o options) (*sdktrace.TracerProvider, error) {
	exp := o.exporter
	if exp == nil {
		var err error
		if exp, err = newExporter(ctx, tc, o); err != nil {
			return nil, err
		}
	}
	if exp == nil {
		return sdktrace.NewTracerProvider(sdktrace.WithResource(res),
			sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.NeverSample()))), nil
	}
	return sdktrace.NewTracerProvider(sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(tc.Ratio()))),
		sdktrace.WithBatcher(exp)), nil
}

// newExporter builds the configured span exporter; nil for "none".
func newExporter(ctx context.Context, tc config.Traces, o options) (sdktrace.SpanExporter, error) {
	switch tc.Exporter {
	case config.TraceExporterNone, "":
		return nil, nil
	case config.TraceExporterStdout:
		return stdouttrace.New(stdouttrace.WithWriter(o.stdout))
	case config.TraceExporterOTLPGRPC:
		var opts []otlptracegrpc.Option
		switch {
		case strings.Contains(tc.Endpoint, "://"):
			opts = append(opts, otlptracegrpc.WithEndpointURL(tc.Endpoint))
		case tc.Endpoint != "":
			opts = append(opts, otlptracegrpc.WithEndpoint(tc.Endpoint))
		}
		if tc.Insecure || strings.HasPrefix(tc.Endpoint, "http://") {
			opts = append(opts, otlptracegrpc.WithInsecure())
		}
		if len(tc.Headers) > 0 {
			opts = append(opts, otlptracegrpc.WithHeaders(revealHeaders(tc.Headers)))
		}
		return otlptracegrpc.New(ctx, opts...)
	case config.TraceExporterOTLPHTTP:
		var opts []otlptracehttp.Option
		switch {
		case strings.Contains(tc.Endpoint, "://"):
			opts = append(opts, otlptracehttp.WithEndpointURL(httpTracesURL(tc.Endpoint)))
		case tc.Endpoint != "":
			opts = append(opts, otlptracehttp.WithEndpoint(tc.Endpoint))
		}
		if tc.Insecure {
			opts = append(opts, otlptracehttp.WithInsecure())
		}
		if len(tc.Headers) > 0 {
			opts = append(opts, otlptracehttp.WithHeaders(revealHeaders(tc.Headers)))
		}
		return otlptracehttp.New(ctx, opts...)
	}
	return nil, fmt.Errorf("unknown exporter %q", tc.Exporter)
}

// httpTracesURL adds /v1/traces to a collector URL without a path.
func httpTracesURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return s
	}
	u.Path = otlpTracesPath
	return u.String()
}

// revealHeaders returns the exporter headers as plain strings.
func revealHeaders(h map[string]config.Secret) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = v.Reveal()
	}
	return out
}
