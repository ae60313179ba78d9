package request

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
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
			n, forward, err := Negotiate(r, s.Route)
			if err != nil {
				s.Fail(w, err)
				return
			}
			s.Version, s.BrokerVersion, s.Forward = n.Platform, n.Broker, forward
			next.ServeHTTP(w, r)
		})
	}
}

// Negotiate negotiates r's X-Broker-API-Version against rt's broker and
// returns the version forwarded: the platform's, capped at the broker's
// maximum.
func Negotiate(r *http.Request, rt *core.Route) (rules.Negotiated, string, error) {
	b := rt.Broker
	vals := r.Header[core.HeaderAPIVersion]
	n, err := rules.Negotiate(vals, b.APIVersion.Min, b.APIVersion.Max, rt.MissingVersionStatus, b.Name)
	if err != nil {
		return n, "", err
	}
	if n.Capped {
		return n, rt.MaxVersion, nil
	}
	return n, vals[0], nil
}
