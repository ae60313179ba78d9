package proxy

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/rules"
)

// withVersion is the version stage: X-Broker-API-Version is negotiated
// against the broker's version range (rules.Negotiate). A missing or empty
// header gets the tenant's missing_version_status (412, or 400 as OSB 2.16
// allows). The value forwarded is the platform's, capped at the broker's
// maximum.
func withVersion() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			up := s.route.up
			vals := r.Header[headerAPIVersion]
			n, err := rules.Negotiate(vals, up.min, up.max, s.route.tenant.missingStatus, up.name)
			if err != nil {
				s.fail(w, err)
				return
			}
			s.Version, s.BrokerVersion, s.Forward = n.Platform, n.Broker, vals[0]
			if n.Capped {
				s.Forward = up.maxString
			}
			next.ServeHTTP(w, r)
		})
	}
}
