package routes

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// IDs is a route's rewrite of the ids it shows (routes[].ids), so
// that one platform can register one broker twice: the catalog's service
// and plan ids, and each service's dashboard_client.id, become the UUIDv5
// of the namespace and the broker's id (derive); the ids stage maps a
// request's derived ids back to the broker's before anything else looks
// at them, so validation, filters, the inventory, quotas, locks and audit
// all see the broker's ids; a GET instance answer's ids are mapped
// forward. Instance and binding ids are the platform's and pass
// unchanged; so do ids the catalog does not derive (a registration made
// with the broker's own ids keeps working, and an unknown id is refused
// by validation as before).
type IDs struct {
	ns uuid.UUID
	// key is what the id table of the namespace is kept under in a
	// catalog entry (catalog.Entry.Views), and views the route's view, by
	// the broker's emulate.advertise (IDsViewOf): one per
	// namespace and filter, so a reload that changes either takes effect
	// on the next request, and costs no allocation on the hot path.
	key   string
	views [2]string
}

// NewIDs is the rewrite of route rc; nil without routes[].ids.
func NewIDs(rc config.Route) *IDs {
	if rc.IDs == nil {
		return nil
	}
	ns := rc.IDs.NamespaceUUID()
	x := &IDs{ns: ns, key: "ids\x00" + ns.String() + "\x00table"}
	var filter string
	if f := catalog.NewFilter(rc); f != nil {
		filter = f.Key
	}
	x.views[0] = "ids\x00" + ns.String() + "\x00\x00" + filter
	x.views[1] = "ids\x00" + ns.String() + "\x00advertise\x00" + filter
	return x
}

// Derive is the id the route shows for the broker's id.
func (x *IDs) Derive(id string) string {
	return uuid.NewSHA1(x.ns, []byte(id)).String()
}

// IDTable maps the ids a route shows back to the broker's: the derived id
// of every service and plan of one catalog (filtered or not: the filters
// judge the broker's ids afterwards).
type IDTable struct {
	Services, Plans idMap
}

// idMap maps the derived ids of one kind (services or plans) back.
type idMap struct {
	// back maps a derived id, as the route shows it, to the broker's.
	back map[string]string
	// forms maps the UUID of a derived id to the id as the route shows
	// it, to tell an id sent in another form (other).
	forms map[uuid.UUID]string
}

func NewIDMap(n int) idMap {
	return idMap{back: make(map[string]string, n), forms: make(map[uuid.UUID]string, n)}
}

// Add adds the derived id of the broker's id.
func (m idMap) Add(x *IDs, id string) {
	u := uuid.NewSHA1(x.ns, []byte(id))
	d := u.String()
	m.back[d], m.forms[u] = id, d
}

// other returns the derived id that id names in a form other than the
// one the route shows (lower-case hex with hyphens): in upper or mixed
// case, in braces, after urn:uuid: (any case) or as 32 hex digits, the
// forms uuid.Parse reads, braces checked (it takes any two bytes for
// them). An id the route shows is no other form of it: look it up in
// back first. No allocation for an id that parses.
func (m idMap) other(id string) (string, bool) {
	switch len(id) {
	case 32, 36, 36 + 9:
	case 36 + 2:
		if id[0] != '{' || id[37] != '}' {
			return "", false
		}
	default:
		return "", false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return "", false
	}
	d, ok := m.forms[u]
	return d, ok
}

// WithIDs is the ids stage, after the retire and rate-limit stages
// (which read no service or plan id: a refusal there costs no catalog
// lookup) and before validation, the first to read them: on a route with
// routes[].ids, the service_id and plan_id of the query and, for
// provision, update and bind, of the body (previous_values' too) are
// mapped back to the broker's ids (idTable), so that every later stage —
// validation, filters, flights, quotas, the guard's locks and orphans,
// the inventory, audit — and the broker see the broker's ids. The
// broker's catalog, which the mapping needs, comes from the cache; when
// none can be had the call is refused with 503 (idsWithoutCatalog), but
// for an unbind or deprovision the gateway answers for a broker retired
// with answer: gone. nil when no route has ids: the stage costs nothing
// then.
func WithIDs(routes map[string]*core.Route, cache *catalog.Cache) core.Middleware {
	on := false
	for _, rt := range routes {
		on = on || IDsOf(rt) != nil
	}
	if !on {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if IDsOf(s.Route) == nil || !carriesIDs(s) {
				next.ServeHTTP(w, r)
				return
			}
			e, _, err := cache.Get(r.Context(), catalog.FetchFor(r, s))
			if err != nil {
				if s.WentAway(r, err) {
					return
				}
				if ep := s.Call.Endpoint; upstream.Of(s.Route).Cfg.Retired.Gone() && (ep == rules.Deprovision || ep == rules.Unbind) {
					next.ServeHTTP(w, r) // answered by the gateway, whatever the ids (retire.go)
					return
				}
				s.Fail(w, idsWithoutCatalog(s, err))
				return
			}
			r2, miss := idTableOf(e, IDsOf(s.Route)).mapBack(r, s)
			if miss != nil {
				s.Fail(w, miss.refusal(s))
				return
			}
			next.ServeHTTP(w, r2)
		})
	}
}

// carriesIDs reports whether s's call carries a service or plan id: in
// its query, or in the body of a provision, update or bind.
func carriesIDs(s *core.Scope) bool {
	if s.Call.ServiceID != "" || s.Call.PlanID != "" {
		return true
	}
	switch s.Call.Endpoint {
	case rules.Provision, rules.Update, rules.Bind:
		return len(s.Body) > 0
	}
	return false
}

// idsWithoutCatalog is the refusal of a call whose ids cannot be mapped
// back because the broker's catalog cannot be had: forwarding the
// platform's ids would hand the broker ids it never made.
func idsWithoutCatalog(s *core.Scope, cause error) error {
	var refusal *catalog.VersionRefusal
	if errors.As(cause, &refusal) {
		return refusal // the broker's answer at this version (see withoutCatalog)
	}
	why := upstream.Said(cause)
	var oe *osb.Error
	var hdr http.Header
	if errors.As(cause, &oe) {
		why, hdr = oe.Description, oe.Header
	}
	s.CatalogUnavailable = catalog.CatalogRefused
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: cause, Header: hdr, Description: fmt.Sprintf(
		"the %s was not forwarded: the route of tenant %q to broker %q shows service and plan ids of its own (routes[].ids), and without the broker's catalog the gateway cannot map them back to the broker's; %s",
		s.Call.Endpoint, s.Tenant, s.Broker, why)}
}

// ForwardAnswer maps the service_id and plan_id of a broker's 200 to GET
// instance forward to the ids x derives (the upstream's modifyResponse
// calls it after the answer was checked against the broker's ids), and
// fixes its length. body is the answer as already read (nil: not read
// yet; a body too large to check passes unchanged).
func (x *IDs) ForwardAnswer(res *http.Response, s *core.Scope, body []byte) error {
	if s.Call.Endpoint != rules.GetInstance || res.StatusCode != http.StatusOK {
		return nil
	}
	if body == nil {
		var err error
		if body, err = upstream.BufferResponse(res); err != nil {
			return &upstream.CutShort{Status: res.StatusCode, Err: err}
		}
		if body == nil {
			return nil
		}
	}
	nb, changed := x.ForwardBody(body)
	if !changed {
		return nil
	}
	old := res.Body
	res.Body, res.ContentLength = io.NopCloser(bytes.NewReader(nb)), int64(len(nb))
	old.Close() // the pooled buffer body was read into (nb is a copy)
	res.Header["Content-Length"] = []string{strconv.Itoa(len(nb))}
	delete(res.Header, "Etag") // it named the broker's bytes
	return nil
}

// ForwardBody maps the top-level service_id and plan_id of a JSON object
// to the ids x derives.
func (x *IDs) ForwardBody(doc []byte) ([]byte, bool) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return doc, false
	}
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, root)
	var ss []splice
	for _, m := range ms {
		if doc[m.ValStart] == '"' && (m.IsFold(doc, "service_id") || m.IsFold(doc, "plan_id")) {
			ss = append(ss, splice{m.ValStart, m.ValEnd, x.Derive(jsonfast.Unquote(doc[m.ValStart:m.ValEnd]))})
		}
	}
	if len(ss) == 0 {
		return doc, false
	}
	return spliced(doc, ss), true
}

// ForwardFetched maps the ids of a GET instance answer the emulation
// stage builds from the inventory (instanceBody).
func (x *IDs) ForwardFetched(out map[string]any) {
	for _, k := range [...]string{"service_id", "plan_id"} {
		if id, ok := out[k].(string); ok && id != "" {
			out[k] = x.Derive(id)
		}
	}
}

func IDsOf(rt *core.Route) *IDs { x, _ := rt.IDs.(*IDs); return x }
