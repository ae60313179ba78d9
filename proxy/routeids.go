package proxy

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/uuid"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// routeIDs is a route's rewrite of the ids it shows (routes[].ids), so
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
type routeIDs struct {
	ns uuid.UUID
	// key is what the id table of the namespace is kept under in a
	// catalog entry (catalogEntry.views), and views the route's view, by
	// the broker's emulate.advertise (catalogEntry.idsView): one per
	// namespace and filter, so a reload that changes either takes effect
	// on the next request, and costs no allocation on the hot path.
	key   string
	views [2]string
}

// newRouteIDs is the rewrite of route rc; nil without routes[].ids.
func newRouteIDs(rc config.Route) *routeIDs {
	if rc.IDs == nil {
		return nil
	}
	ns := rc.IDs.NamespaceUUID()
	x := &routeIDs{ns: ns, key: "ids\x00" + ns.String() + "\x00table"}
	var filter string
	if f := newCatalogFilter(rc); f != nil {
		filter = f.key
	}
	x.views[0] = "ids\x00" + ns.String() + "\x00\x00" + filter
	x.views[1] = "ids\x00" + ns.String() + "\x00advertise\x00" + filter
	return x
}

// derive is the id the route shows for the broker's id.
func (x *routeIDs) derive(id string) string {
	return uuid.NewSHA1(x.ns, []byte(id)).String()
}

// idTable maps the ids a route shows back to the broker's: the derived id
// of every service and plan of one catalog (filtered or not: the filters
// judge the broker's ids afterwards).
type idTable struct {
	services, plans idMap
}

// idMap maps the derived ids of one kind (services or plans) back.
type idMap struct {
	// back maps a derived id, as the route shows it, to the broker's.
	back map[string]string
	// forms maps the UUID of a derived id to the id as the route shows
	// it, to tell an id sent in another form (other).
	forms map[uuid.UUID]string
}

func newIDMap(n int) idMap {
	return idMap{back: make(map[string]string, n), forms: make(map[uuid.UUID]string, n)}
}

// add adds the derived id of the broker's id.
func (m idMap) add(x *routeIDs, id string) {
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

// idTable returns the table of x for e's catalog, built once per
// namespace and kept with the entry.
func (e *catalogEntry) idTable(x *routeIDs) *idTable {
	key := x.key
	if t, ok := e.views.Load(key); ok {
		return t.(*idTable)
	}
	cat := e.index.Catalog()
	t := &idTable{services: newIDMap(len(cat.Services)), plans: newIDMap(0)}
	for i := range cat.Services {
		s := &cat.Services[i]
		t.services.add(x, s.ID)
		for j := range s.Plans {
			t.plans.add(x, s.Plans[j].ID)
		}
	}
	actual, _ := e.views.LoadOrStore(key, t)
	return actual.(*idTable)
}

// idsView is the view v (the route's filtered, maybe advertised, view of
// e) with the ids x derives, built once per filter, advertise and
// namespace and kept with the entry, its ETag that of the rewritten
// bytes.
func (e *catalogEntry) idsView(v *catalogView, rt *route) (*catalogView, error) {
	key := idsOf(rt).views[0]
	if upOf(rt).cfg.Emulate.Advertise {
		key = idsOf(rt).views[1]
	}
	if got, ok := e.views.Load(key); ok {
		return got.(*catalogView), nil
	}
	body, err := deriveCatalogIDs(v.body, idsOf(rt))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	nv := newCatalogView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.views.LoadOrStore(key, nv)
	return actual.(*catalogView), nil
}

// splice is one string value of a JSON document to replace.
type splice struct {
	start, end int
	with       string
}

// spliced returns doc with each splice's bytes replaced by its string,
// quoted; ss is put in document order first (splices never overlap).
func spliced(doc []byte, ss []splice) []byte {
	slices.SortFunc(ss, func(a, b splice) int { return cmp.Compare(a.start, b.start) })
	out := make([]byte, 0, len(doc)+len(ss)*40)
	at := 0
	for _, sp := range ss {
		out = append(out, doc[at:sp.start]...)
		out = jsonfast.AppendString(out, sp.with)
		at = sp.end
	}
	return append(out, doc[at:]...)
}

// memberBuf is how many members an object's scan holds on the stack.
const memberBuf = 16

// stringMembers calls fn with the value of each string member of the
// object at doc[open] whose key is name (see keyIs: every duplicate, not
// the last only).
func stringMembers(doc []byte, open int, name string, fn func(start, end int, value string)) {
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, open)
	for _, m := range ms {
		if doc[m.ValStart] == '"' && m.IsFold(doc, name) {
			fn(m.ValStart, m.ValEnd, jsonfast.Unquote(doc[m.ValStart:m.ValEnd]))
		}
	}
}

// members returns the values of the members of the object at doc[open]
// whose key is name (see keyIs) and whose value opens with kind ('{' or
// '[').
func members(doc []byte, open int, name string, kind byte) []int {
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, open)
	var out []int
	for _, m := range ms {
		if doc[m.ValStart] == kind && m.IsFold(doc, name) {
			out = append(out, m.ValStart)
		}
	}
	return out
}

// deriveCatalogIDs rewrites a catalog's services[].id,
// services[].plans[].id and services[].dashboard_client.id to the ids x
// derives, every other byte as the broker sent it.
func deriveCatalogIDs(doc []byte, x *routeIDs) ([]byte, error) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return nil, errors.New("the catalog is not a JSON object")
	}
	var ss []splice
	derive := func(start, end int, id string) { ss = append(ss, splice{start, end, x.derive(id)}) }
	for _, arr := range members(doc, root, "services", '[') {
		services, _, _ := jsonfast.ArrayElements(doc, arr)
		for _, svc := range services {
			if doc[svc.Start] != '{' {
				continue
			}
			// Visited key by key; spliced puts them in document order.
			stringMembers(doc, svc.Start, "id", derive)
			for _, dc := range members(doc, svc.Start, "dashboard_client", '{') {
				stringMembers(doc, dc, "id", derive)
			}
			for _, pa := range members(doc, svc.Start, "plans", '[') {
				plans, _, _ := jsonfast.ArrayElements(doc, pa)
				for _, p := range plans {
					if doc[p.Start] == '{' {
						stringMembers(doc, p.Start, "id", derive)
					}
				}
			}
		}
	}
	return spliced(doc, ss), nil
}

// withRouteIDs is the ids stage, after the retire and rate-limit stages
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
func withRouteIDs(routes routeTable, cache *CatalogCache) Middleware {
	on := false
	for _, rt := range routes {
		on = on || idsOf(rt) != nil
	}
	if !on {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			if idsOf(s.Route) == nil || !carriesIDs(s) {
				next.ServeHTTP(w, r)
				return
			}
			e, _, err := cache.get(r.Context(), catalogFetchFor(r, s))
			if err != nil {
				if s.WentAway(r, err) {
					return
				}
				if ep := s.Call.Endpoint; upOf(s.Route).cfg.Retired.Gone() && (ep == rules.Deprovision || ep == rules.Unbind) {
					next.ServeHTTP(w, r) // answered by the gateway, whatever the ids (retire.go)
					return
				}
				s.Fail(w, idsWithoutCatalog(s, err))
				return
			}
			r2, miss := e.idTable(idsOf(s.Route)).mapBack(r, s)
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
func carriesIDs(s *Scope) bool {
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
func idsWithoutCatalog(s *Scope, cause error) error {
	var refusal *versionRefusal
	if errors.As(cause, &refusal) {
		return refusal // the broker's answer at this version (see withoutCatalog)
	}
	why := said(cause)
	var oe *osb.Error
	var hdr http.Header
	if errors.As(cause, &oe) {
		why, hdr = oe.Description, oe.Header
	}
	s.CatalogUnavailable = CatalogRefused
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: cause, Header: hdr, Description: fmt.Sprintf(
		"the %s was not forwarded: the route of tenant %q to broker %q shows service and plan ids of its own (routes[].ids), and without the broker's catalog the gateway cannot map them back to the broker's; %s",
		s.Call.Endpoint, s.Tenant, s.Broker, why)}
}

// idMiss is a service or plan id sent in another form than the route
// shows it (idMap.other): upper case, braces, urn:uuid:. It is refused,
// not mapped back: what the platform sent is not an id of the route's
// catalog, and the broker never made it either.
type idMiss struct {
	// field names where the id came: "service_id",
	// "previous_values.plan_id", "query parameter service_id".
	field     string
	got, want string
}

// refusal is the 400 a request carrying m gets, the same for an id in the
// query and in the body.
func (m *idMiss) refusal(s *Scope) error {
	return &osb.Error{Status: http.StatusBadRequest, Description: fmt.Sprintf(
		"%s must be %q, as the route of tenant %q to broker %q shows it, got %q: a route with ids of its own (routes[].ids) maps back only the ids its catalog shows, as it shows them (lower-case hex with hyphens, without braces or urn:uuid:)",
		m.field, m.want, s.Tenant, s.Broker, m.got)}
}

// mapBack returns r with the service and plan ids of its query and body
// mapped back to the broker's, and s's Call and Body to match (r itself
// when nothing changed; the inbound request is never modified). Ids t
// does not know pass unchanged; an id sent in another form than the
// route shows (idMiss) stops the mapping, and the call is refused.
func (t *idTable) mapBack(r *http.Request, s *Scope) (*http.Request, *idMiss) {
	var r2 *http.Request
	q, changed, miss := t.mapQuery(r.URL.RawQuery, &s.Call)
	if miss != nil {
		return r, miss
	}
	if changed {
		r2 = new(http.Request)
		*r2 = *r
		u := *r.URL
		u.RawQuery = q
		r2.URL = &u
	}
	switch s.Call.Endpoint {
	case rules.Provision, rules.Update, rules.Bind:
		nb, changed, miss := t.mapBody(s.Body)
		if miss != nil {
			return r, miss
		}
		if changed {
			if r2 == nil {
				r2 = new(http.Request)
				*r2 = *r
			}
			r2.Body = io.NopCloser(bytes.NewReader(nb))
			r2.ContentLength = int64(len(nb))
			s.Body = nb
		}
	}
	if r2 == nil {
		return r, nil
	}
	return r2, nil
}

// mapQuery maps the service_id and plan_id parameters of a raw query
// (classified: no ";", no malformed escape, no repeated id parameter),
// every other byte as sent, and sets c's to match; c's ids are the
// decoded ones, so an id percent-encoded in any way is looked up as what
// it decodes to. It changes nothing when either id is an idMiss.
func (t *idTable) mapQuery(raw string, c *rules.Call) (string, bool, *idMiss) {
	svc, okSvc := t.services.back[c.ServiceID]
	plan, okPlan := t.plans.back[c.PlanID]
	if !okSvc && c.ServiceID != "" {
		if want, near := t.services.other(c.ServiceID); near {
			return raw, false, &idMiss{field: "query parameter service_id", got: c.ServiceID, want: want}
		}
	}
	if !okPlan && c.PlanID != "" {
		if want, near := t.plans.other(c.PlanID); near {
			return raw, false, &idMiss{field: "query parameter plan_id", got: c.PlanID, want: want}
		}
	}
	if !okSvc && !okPlan {
		return raw, false, nil
	}
	var b strings.Builder
	b.Grow(len(raw) + 8)
	for rest := raw; ; {
		p, more, found := strings.Cut(rest, "&")
		k, _, _ := strings.Cut(p, "=")
		key, err := url.QueryUnescape(k)
		switch {
		case err != nil:
			b.WriteString(p)
		case key == "service_id" && okSvc:
			b.WriteString(k + "=" + url.QueryEscape(svc))
		case key == "plan_id" && okPlan:
			b.WriteString(k + "=" + url.QueryEscape(plan))
		default:
			b.WriteString(p)
		}
		if !found {
			break
		}
		b.WriteByte('&')
		rest = more
	}
	if okSvc {
		c.ServiceID = svc
	}
	if okPlan {
		c.PlanID = plan
	}
	return b.String(), true, nil
}

// mapBody maps the service_id and plan_id of a request body, and those of
// its previous_values, every duplicate and case of their keys, every
// other byte as sent; an idMiss among them maps nothing. A body that is
// no JSON object passes unchanged (the validate stage refuses it).
func (t *idTable) mapBody(doc []byte) ([]byte, bool, *idMiss) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return doc, false, nil
	}
	var sbuf [4]splice
	ss, miss := t.mapObject(doc, root, sbuf[:0], "")
	if miss != nil {
		return doc, false, miss
	}
	if len(ss) == 0 {
		return doc, false, nil
	}
	return spliced(doc, ss), true, nil
}

// mapObject appends to ss the splices that map the service_id and plan_id
// members of the object at doc[open] back, and, at the top (in == ""),
// those of its previous_values; in is the path of the object, for the
// idMiss it returns at the first id sent in another form.
func (t *idTable) mapObject(doc []byte, open int, ss []splice, in string) ([]splice, *idMiss) {
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, open)
	for _, m := range ms {
		var table idMap
		var name string
		switch v := doc[m.ValStart]; {
		case v == '"' && m.IsFold(doc, "service_id"):
			table, name = t.services, "service_id"
		case v == '"' && m.IsFold(doc, "plan_id"):
			table, name = t.plans, "plan_id"
		case v == '{' && in == "" && m.IsFold(doc, "previous_values"):
			var miss *idMiss
			if ss, miss = t.mapObject(doc, m.ValStart, ss, "previous_values."); miss != nil {
				return ss, miss
			}
			continue
		default:
			continue
		}
		id := jsonfast.Unquote(doc[m.ValStart:m.ValEnd])
		if to, ok := table.back[id]; ok {
			ss = append(ss, splice{m.ValStart, m.ValEnd, to})
		} else if want, near := table.other(id); near {
			return ss, &idMiss{field: in + name, got: id, want: want}
		}
	}
	return ss, nil
}

// forwardAnswer maps the service_id and plan_id of a broker's 200 to GET
// instance forward to the ids x derives (the upstream's modifyResponse
// calls it after the answer was checked against the broker's ids), and
// fixes its length. body is the answer as already read (nil: not read
// yet; a body too large to check passes unchanged).
func (x *routeIDs) forwardAnswer(res *http.Response, s *Scope, body []byte) error {
	if s.Call.Endpoint != rules.GetInstance || res.StatusCode != http.StatusOK {
		return nil
	}
	if body == nil {
		var err error
		if body, err = bufferResponse(res); err != nil {
			return &cutShort{status: res.StatusCode, err: err}
		}
		if body == nil {
			return nil
		}
	}
	nb, changed := x.forwardBody(body)
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

// forwardBody maps the top-level service_id and plan_id of a JSON object
// to the ids x derives.
func (x *routeIDs) forwardBody(doc []byte) ([]byte, bool) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return doc, false
	}
	var buf [memberBuf]jsonfast.Member
	ms, _, _ := jsonfast.AppendObjectMembers(buf[:0], doc, root)
	var ss []splice
	for _, m := range ms {
		if doc[m.ValStart] == '"' && (m.IsFold(doc, "service_id") || m.IsFold(doc, "plan_id")) {
			ss = append(ss, splice{m.ValStart, m.ValEnd, x.derive(jsonfast.Unquote(doc[m.ValStart:m.ValEnd]))})
		}
	}
	if len(ss) == 0 {
		return doc, false
	}
	return spliced(doc, ss), true
}

// forwardFetched maps the ids of a GET instance answer the emulation
// stage builds from the inventory (instanceBody).
func (x *routeIDs) forwardFetched(out map[string]any) {
	for _, k := range [...]string{"service_id", "plan_id"} {
		if id, ok := out[k].(string); ok && id != "" {
			out[k] = x.derive(id)
		}
	}
}
