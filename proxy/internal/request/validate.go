package request

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// WithValidate is the validate stage. For provision, update, bind,
// deprovision and unbind it gets the broker's catalog where the call needs
// it (needsCatalog: a route with filters, or rules checked against the
// catalog), and checks the request against the OSB rules of the
// platform's API version and against the catalog (rules.CheckRequest), per
// the broker's validation.requests mode: enforce refuses (400/412/422)
// without reaching the broker, report records the findings and forwards.
// When the catalog cannot be had, the request is checked by the rules
// that need none, then withoutCatalog refuses it with 503 or lets it on
// unchecked. A rotation is checked against the catalog too
// (rules.CheckRotation), and its predecessor against the broker's
// inventory in st (checkPredecessor). Then, for a broker whose maximum
// version is below the platform's, it bridges the body (rules.Bridge):
// older brokers get the top-level fields their version expects, without
// the members it predates that the gateway drops.
func WithValidate(cache *catalog.Cache, st store.Inventory, log *slog.Logger) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if !s.Call.Endpoint.Mutating() {
				next.ServeHTTP(w, r)
				return
			}
			up := upstream.Of(s.Route)
			var noCatalog error // why the catalog the call needs cannot be had
			if catalog.NeedsCatalog(s) {
				e, _, err := cache.Get(r.Context(), catalog.FetchFor(r, s))
				if e != nil { // a nil *catalog.Entry would make a non-nil core.Catalog
					s.Catalog = e
				}
				noCatalog = err
			}
			if mode := up.Cfg.Validation.Requests; mode != config.ModeOff {
				var cat rules.CatalogView // nil: checked without the catalog
				if s.Catalog != nil {
					cat = s.Catalog.Index()
				}
				req, vs := rules.CheckRequest(s.Call, s.Version, s.Body, cat)
				vs = append(vs, rules.CheckRotation(s.Call, s.Version, up.Max, req, cat)...)
				s.Request = req
				if len(vs) > 0 {
					s.AddFindings(log, r, "request", vs, mode == config.ModeReport)
					if mode == config.ModeEnforce {
						s.RefusedByRules = true
						s.Fail(w, rules.Reject(vs))
						return
					}
				}
				if checkPredecessor(w, r, s, st, log) {
					return
				}
			}
			// After the rules that need no catalog: a request they refuse
			// gets their lasting 400, not a 503 that invites a retry.
			if noCatalog != nil {
				if s.WentAway(r, noCatalog) {
					return
				}
				if refusal := catalog.WithoutCatalog(s, noCatalog); refusal != nil {
					s.Fail(w, refusal)
					return
				}
			}
			if up.Max.Less(s.Version) && len(s.Body) > 0 {
				if nb, changed, err := rules.Bridge(s.Call, s.Body, s.Version, up.Max); err == nil && changed {
					r2 := *r // never mutate the inbound request
					r2.Body = io.NopCloser(bytes.NewReader(nb))
					r2.ContentLength = int64(len(nb))
					s.Body, s.Bridged = nb, true
					r = &r2
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}
