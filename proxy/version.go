package proxy

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
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
			n, forward, err := negotiate(r, s.Route)
			if err != nil {
				s.Fail(w, err)
				return
			}
			s.Version, s.BrokerVersion, s.Forward = n.Platform, n.Broker, forward
			next.ServeHTTP(w, r)
		})
	}
}

// negotiate negotiates r's X-Broker-API-Version against rt's broker and
// returns the version forwarded: the platform's, capped at the broker's
// maximum.
func negotiate(r *http.Request, rt *route) (rules.Negotiated, string, error) {
	up := upOf(rt)
	vals := r.Header[core.HeaderAPIVersion]
	n, err := rules.Negotiate(vals, up.min, up.max, auth.TenantOf(rt).MissingStatus, up.name)
	if err != nil {
		return n, "", err
	}
	if n.Capped {
		return n, up.maxString, nil
	}
	return n, vals[0], nil
}
