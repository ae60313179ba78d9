package observe

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// WithMetrics is the metrics stage: after the inner stages return it
// counts the call and its duration by tenant, broker, endpoint and status
// code, blocked calls, the findings in the Scope, orphan-mitigation
// candidates, calls decided without a catalog and how polls were answered
// (the poll shield). It sits inside the trace
// stage (a sampled span's trace id becomes the exemplar). A nil m leaves
// the stage out (nil Middleware).
func WithMetrics(m *metrics.Metrics) core.Middleware {
	if m == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			m.InFlight.Add(1)
			defer m.InFlight.Add(-1)
			next.ServeHTTP(w, r)
			if s := core.ScopeOf(w, r); s != nil {
				m.Record(r.Context(), s, r.Method)
			}
		})
	}
}
