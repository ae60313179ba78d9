package request

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// WithClassify is the classify stage: it names the OSB call (endpoint, ids,
// flags) with rules.Classify, answers 404/405 for what is no OSB endpoint,
// and 412 for an endpoint that does not exist at the negotiated version or
// at the newest version the broker speaks (it would not understand it),
// unless the broker gets the call without what its version predates (see
// checkVersions).
func WithClassify() core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			call, err := rules.Classify(r.Method, s.Path, r.URL.RawQuery)
			if m, ok := s.Route.Migration.(migrator); ok && err == nil {
				err = m.Migrate(r, s, call) // the broker that holds the instance
			}
			if err == nil {
				err = checkVersions(call, s)
			}
			s.Call = call
			if err != nil {
				s.Fail(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// checkVersions refuses a call the platform's version does not have, and
// one the broker's newest version cannot serve: for a broker that predates
// a flag the call carries, the predated table's Drop rows
// (rules.ForwardingFor) say what the broker gets without, and only what
// the broker cannot serve even so gets 412 (GET instance, GET binding and
// binding last_operation below 2.14) — unless an emulation claims the call
// first (upstream.claims), when the gateway answers it itself. The call the
// platform sent stays s.Call; what the broker gets without is
// s.forwarding, which the upstream applies.
func checkVersions(call rules.Call, s *core.Scope) error {
	if err := rules.CheckVersion(call, s.Version); err != nil {
		return err
	}
	up := upstream.Of(s.Route)
	fw := rules.ForwardingFor(call, s.Version, up.Max)
	if need := rules.RequiredVersion(fw.Call(call)); up.Max.Less(need) {
		if claims(up, call) {
			return nil
		}
		err := osb.Errorf(http.StatusPreconditionFailed, "", "%s needs %s %s or later; the broker %q speaks at most %s",
			rules.DescribeCall(call), osb.HeaderAPIVersion, need, s.Broker, up.Max)
		if up.ShimClaims(call) {
			s.ShimTooOld = err // refused by the async shim unless it owns the polled operation (servePoll)
			return nil
		}
		return err
	}
	s.Forwarding = fw
	if !fw.IsZero() && fw.ChangesQuery() {
		s.Bridged = true
	}
	return nil
}

// claims reports whether an emulation of the gateway serves call for the
// broker though the broker's version cannot (the fetch emulation's GET
// instance and GET binding): the classify stage asks before it refuses the
// call with 412. Each emulation that answers what a broker's version lacks
// adds its claim here.
func claims(u *upstream.Upstream, call rules.Call) bool { return u.FetchClaimed(call) }

// migrator sends a call to the broker that holds its instance: a route's
// migrate_to (core.Route.Migration).
type migrator interface {
	Migrate(r *http.Request, s *core.Scope, call rules.Call) error
}
