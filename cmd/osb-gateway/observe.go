package main

import (
	"context"
	"log/slog"
	"os"
	"runtime"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// observability is what the telemetry and audit sections build once at
// start: the tracer provider and metrics registry, the metrics, the audit
// writer, and the tracing, metrics and audit parts every Gateway (and
// every reload) is given.
type observability struct {
	prov    *telemetry.Providers
	metrics *proxy.Metrics
	audit   *audit.Writer
	tracing *proxy.Tracing
	record  *proxy.AuditOptions
}

// newObservability builds them from cfg; topts go to telemetry.Setup
// after the logger (tests redirect the stdout span exporter).
func newObservability(cfg *config.Config, log *slog.Logger, topts ...telemetry.Option) (*observability, error) {
	prov, err := telemetry.Setup(context.Background(), cfg.Telemetry, version, append([]telemetry.Option{telemetry.WithLogger(log)}, topts...)...)
	if err != nil {
		return nil, err
	}
	// With metrics disabled nothing reads the instruments: a nil
	// *proxy.Metrics leaves the metrics stage and transport out.
	var m *proxy.Metrics
	if prov.Registerer != nil {
		if m, err = proxy.NewMetrics(prov.Registerer, nil); err != nil {
			_ = prov.Shutdown(context.Background())
			return nil, err
		}
	}
	o := &observability{prov: prov, metrics: m}
	if cfg.Audit.Sink != config.AuditSinkOff {
		o.audit, err = audit.Open(cfg.Audit, audit.Options{Stdout: os.Stdout, OnError: func(e error) {
			m.AuditWriteError()
			log.Error("audit write failed", slog.String("error", e.Error()))
		}, OnHead: func(h audit.Head) { logAuditHead(log, h) }})
		if err != nil {
			_ = prov.Shutdown(context.Background())
			return nil, err
		}
		o.record = &proxy.AuditOptions{Writer: o.audit, ParameterKeys: cfg.Audit.Parameters == config.AuditParametersKeys}
	}
	// With exporter none no span would ever leave the process: the trace
	// stage and the broker-call spans are left out, and the platform's own
	// traceparent reaches the broker unchanged (the audit record takes its
	// trace id from it).
	if cfg.Telemetry.Traces.Exporter != config.TraceExporterNone {
		o.tracing = &proxy.Tracing{Provider: prov.TracerProvider, Propagator: prov.Propagator}
	}
	return o, nil
}

// options returns opts with the tracing, metrics and audit parts set:
// the same for every Gateway of the process.
func (o *observability) options(opts proxy.Options) proxy.Options {
	opts.Tracing, opts.Metrics, opts.Audit = o.tracing, o.metrics, o.record
	return opts
}

// observe makes the metrics read what s serves at scrape time: the
// current gateway's catalog counters, brokers up and broker client
// certificates, the state store's locks, the expiring bindings, and the
// platform listener's certificates; and names the build.
func (o *observability) observe(s *server) {
	m := o.metrics
	if m == nil {
		return
	}
	b := readBuildInfo()
	m.SetBuildInfo(b.Version, b.Revision, runtime.Version())
	m.ObserveCatalogs(func() map[string]proxy.CatalogCounts { return s.sw.Load().Catalogs().Counts() })
	m.ObserveBrokers(func() map[string]bool { return s.sw.Load().BrokersUp() })
	m.ObserveState(func(ctx context.Context) (proxy.StateCount, error) {
		held, err := s.st.List(ctx, store.ListFilter{}) // one read of the store per scrape
		n := proxy.StateCount{Locks: int64(len(held))}
		for _, l := range held {
			if l.Async {
				n.Operations++
			}
			if n.Oldest.IsZero() || l.Started.Before(n.Oldest) {
				n.Oldest = l.Started
			}
		}
		return n, err
	})
	m.ObserveExpiring(func(ctx context.Context) (map[string]int, error) {
		return s.sw.Load().CountExpiringBindings(ctx)
	})
	m.ObserveInstances(func(ctx context.Context) ([]proxy.InstanceCount, error) {
		return s.sw.Load().CountInstances(ctx)
	})
	m.ObserveCertificates(func() []proxy.CertExpiry {
		if s.tls == nil {
			return nil
		}
		var out []proxy.CertExpiry
		for _, c := range s.tls.Certificates() {
			out = append(out, proxy.CertExpiry{Use: "listener", Cert: c})
		}
		return out
	}, func() []proxy.CertExpiry { return s.sw.Load().BrokerCertificates() })
}

// close flushes the audit log and the telemetry exporters.
func (o *observability) close(ctx context.Context) {
	if o.audit != nil {
		_ = o.audit.Close()
	}
	_ = o.prov.Shutdown(ctx)
}

// logAuditHead logs the audit chain's head (audit.head_log_interval): a
// copy, outside the audit directory, of what the head file says, so that
// records cut off the end show even when the head file was rewritten too.
// "osb-gateway audit verify -head" takes it saved as a file (the JSON of
// the head attribute).
func logAuditHead(log *slog.Logger, h audit.Head) {
	log.LogAttrs(context.Background(), slog.LevelInfo, "audit head", slog.Group("head",
		slog.String("file", h.File), slog.Int("seq", h.Seq), slog.Int64("records", h.Records),
		slog.Int64("size", h.Size), slog.String("last_hash", h.LastHash), slog.String("key_id", h.KeyID),
		slog.Time("time", h.Time)))
}
