package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
)

// BenchmarkStageAfterClassify measures the stages that need a classified
// call — validate, catalog, guard, and the observing stages trace (1%
// sampling into a batch processor) and audit (a record per call) — each
// on top of the scope, route fields and classify stages; "classify" is
// that base alone, so a stage costs its figure minus the base's.
func BenchmarkStageAfterClassify(b *testing.B) {
	g := benchGateway(b)
	if err := g.WarmCatalogs(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(nil) })
	rt := newRoute("/t1/b1", mustTenant(b, &g.cfg.Tenants[0]), g.upstreams["b1"])
	rt.Filter, rt.Guard = catalog.NewFilter(g.cfg.Tenants[0].Routes[0]), g.guard
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.01))))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	aw, err := audit.Open(config.Audit{Sink: config.AuditSinkStdout, Fsync: config.AuditFsyncNever}, audit.Options{Stdout: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = aw.Close() })
	const poll = "/v2/service_instances/i-1/last_operation"
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, st := range []struct {
		name, path string
		mw         Middleware
	}{
		{"classify", poll, func(h http.Handler) http.Handler { return h }},
		{"validate", poll, request.WithValidate(g.catalogs, g.guard.St, slog.New(slog.DiscardHandler))},
		{"guard", poll, guard.WithGuard(g.guard)},
		{"catalog", "/v2/catalog", routes.WithCatalog(g.catalogs)},
		{"trace", poll, observe.WithTrace(&Tracing{Provider: tp, Propagator: propagation.TraceContext{}})},
		{"audit", poll, observe.WithAudit(&AuditOptions{Writer: aw, ParameterKeys: true}, nil, slog.Default(), time.Now, nil)},
	} {
		b.Run(st.name, func(b *testing.B) {
			h := Stack(terminal, withScope(time.Now), prefillRoute(rt, st.path), request.WithClassify(), st.mw)
			benchServe(b, h, benchRequest("/t1/b1"+st.path+"?operation=op1"))
		})
	}
}
