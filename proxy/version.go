package proxy

import (
	"errors"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// withVersion is the version stage: X-Broker-API-Version must be MAJOR.MINOR
// with major 2 and at least the broker's minimum. A missing or empty header
// gets the tenant's missing_version_status (412, or 400 as OSB 2.16
// allows). The value forwarded is the platform's, capped at the broker's
// maximum.
func withVersion() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			if err := negotiate(s, r.Header[headerAPIVersion]); err != nil {
				s.fail(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func negotiate(s *Scope, vals []string) error {
	up := s.route.up
	var raw string
	if len(vals) > 0 {
		raw = vals[0]
	}
	if raw == "" {
		return osb.Errorf(s.route.tenant.missingStatus, "",
			"X-Broker-API-Version header is missing; the broker %q accepts %s to %s", up.name, up.min, up.max)
	}
	if len(vals) > 1 {
		return osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version was sent %d times; expected one MAJOR.MINOR value the broker %q accepts (%s to %s)", len(vals), up.name, up.min, up.max)
	}
	v, err := osb.ParseVersion(raw)
	if errors.Is(err, osb.ErrVersionSyntax) {
		return osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %q is not of the form MAJOR.MINOR; the broker %q accepts %s to %s", raw, up.name, up.min, up.max)
	}
	if v.Major != up.min.Major {
		return osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %s has major version %d; the broker %q accepts %s to %s", v, v.Major, up.name, up.min, up.max)
	}
	if v.Less(up.min) {
		return osb.Errorf(http.StatusPreconditionFailed, "",
			"X-Broker-API-Version %s is below %s, the lowest the broker %q accepts", v, up.min, up.name)
	}
	s.Version, s.BrokerVersion, s.Forward = v, v, raw
	if up.max.Less(v) {
		s.BrokerVersion, s.Forward = up.max, up.maxString
	}
	return nil
}
