package request

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// WithVersion is the version stage: X-Broker-API-Version is negotiated
// against the broker's version range (rules.Negotiate). A missing or empty
// header gets the tenant's missing_version_status (412, or 400 as OSB 2.16
// allows). The value forwarded is the platform's, capped at the broker's
// maximum.
func WithVersion() core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			n, forward, err := core.Negotiate(r, s.Route)
			if err != nil {
				s.Fail(w, err)
				return
			}
			s.Version, s.BrokerVersion, s.Forward = n.Platform, n.Broker, forward
			next.ServeHTTP(w, r)
		})
	}
}
