package main

import (
	"context"
	"log/slog"
	"net/http"
	"os"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// observability is what the telemetry and audit sections build once at
// start: tracer and meter providers, the metrics, the audit writer, and the
// stages and transport wrapper every Gateway (and every reload) uses.
type observability struct {
	prov    *telemetry.Providers
	metrics *proxy.Metrics
	audit   *audit.Writer
	outer   []proxy.Middleware
	wrap    func(http.RoundTripper) http.RoundTripper
}

func newObservability(cfg *config.Config, log *slog.Logger) (*observability, error) {
	prov, err := telemetry.Setup(context.Background(), cfg.Telemetry, version, telemetry.WithLogger(log))
	if err != nil {
		return nil, err
	}
	// With metrics disabled nothing reads the instruments: a nil
	// *proxy.Metrics leaves the metrics stage and transport out.
	var m *proxy.Metrics
	if prov.Registerer != nil {
		if m, err = proxy.NewMetrics(prov.MeterProvider, prov.Registerer, nil); err != nil {
			_ = prov.Shutdown(context.Background())
			return nil, err
		}
	}
	o := &observability{prov: prov, metrics: m}
	if cfg.Audit.Sink != config.AuditSinkOff {
		o.audit, err = audit.Open(cfg.Audit, audit.Options{Stdout: os.Stdout, OnError: func(e error) {
			m.AuditWriteError()
			log.Error("audit write failed", slog.String("error", e.Error()))
		}})
		if err != nil {
			_ = prov.Shutdown(context.Background())
			return nil, err
		}
	}
	// With exporter none no span would ever leave the process: the trace
	// stage and the broker-call spans are left out, and the platform's own
	// traceparent reaches the broker unchanged (the audit record takes its
	// trace id from it).
	tracing := cfg.Telemetry.Traces.Exporter != config.TraceExporterNone
	if tracing {
		o.outer = append(o.outer, proxy.TraceStage(prov.TracerProvider, prov.Propagator))
	}
	o.outer = append(o.outer, m.Stage())
	if o.audit != nil {
		o.outer = append(o.outer, proxy.AuditStage(proxy.AuditOptions{Writer: o.audit, Metrics: m, Logger: log,
			ParameterKeys: cfg.Audit.Parameters == config.AuditParametersKeys}))
	}
	o.wrap = func(rt http.RoundTripper) http.RoundTripper {
		if tracing {
			rt = proxy.InstrumentTransport(rt, prov.TracerProvider, prov.Propagator)
		}
		return m.Transport(rt)
	}
	return o, nil
}

// close flushes the audit log and the telemetry exporters.
func (o *observability) close(ctx context.Context) {
	if o.audit != nil {
		_ = o.audit.Close()
	}
	_ = o.prov.Shutdown(ctx)
}
