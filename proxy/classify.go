package proxy

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/rules"
)

// withClassify is the classify stage: it names the OSB call (endpoint, ids,
// flags) with rules.Classify, answers 404/405 for what is no OSB endpoint,
// and 412 for an endpoint that does not exist at the negotiated version.
func withClassify() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeFrom(r.Context())
			call, err := rules.Classify(r.Method, s.Path, r.URL.RawQuery)
			if err == nil {
				err = rules.CheckVersion(call, s.Version)
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
