package proxy

import (
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"net/http"

	"github.com/osb-gateway/osb-gateway/rules"
)

// withClassify is the classify stage: it names the OSB call (endpoint, ids,
// flags) with rules.Classify, answers 404/405 for what is no OSB endpoint,
// and 412 for an endpoint that does not exist at the negotiated version or
// at the newest version the broker speaks (it would not understand it).
func withClassify() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			call, err := rules.Classify(r.Method, s.Path, r.URL.RawQuery)
			if err == nil {
				err = checkVersions(call, s)
			}
			s.Call = call
			if err != nil {
				s.fail(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

func checkVersions(call rules.Call, s *Scope) error {
	if err := rules.CheckVersion(call, s.Version); err != nil {
		return err
	}
	if need := rules.RequiredVersion(call); s.route.up.max.Less(need) && !s.route.up.fetchClaimed(call) {
		return osb.Errorf(http.StatusPreconditionFailed, "", "%s needs %s %s or later; the broker %q speaks at most %s",
			rules.DescribeCall(call), osb.HeaderAPIVersion, need, s.Broker, s.route.up.max)
	}
	return nil
}
