package routes

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// The catalog a route with ids shows: the broker's catalog with every
// service and plan id derived (routes[].ids), spliced into its bytes.

// idTableOf returns the table of x for e's catalog, built once per
// namespace and kept with the entry.
func idTableOf(e *catalog.Entry, x *IDs) *IDTable {
	key := x.key
	if t, ok := e.Views.Load(key); ok {
		return t.(*IDTable)
	}
	cat := e.Rules.Catalog()
	t := &IDTable{Services: NewIDMap(len(cat.Services)), Plans: NewIDMap(0)}
	for i := range cat.Services {
		s := &cat.Services[i]
		t.Services.Add(x, s.ID)
		for j := range s.Plans {
			t.Plans.Add(x, s.Plans[j].ID)
		}
	}
	actual, _ := e.Views.LoadOrStore(key, t)
	return actual.(*IDTable)
}

// IDsViewOf is the view v (the route's filtered, maybe advertised, view of
// e) with the ids x derives, built once per filter, advertise and
// namespace and kept with the entry, its ETag that of the rewritten
// bytes.
func IDsViewOf(e *catalog.Entry, v *catalog.TenantView, rt *core.Route) (*catalog.TenantView, error) {
	key := IDsOf(rt).views[0]
	if upstream.Of(rt).Cfg.Emulate.Advertise {
		key = IDsOf(rt).views[1]
	}
	if got, ok := e.Views.Load(key); ok {
		return got.(*catalog.TenantView), nil
	}
	body, err := DeriveCatalogIDs(v.Body, IDsOf(rt))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	nv := catalog.NewTenantView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.Views.LoadOrStore(key, nv)
	return actual.(*catalog.TenantView), nil
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

// DeriveCatalogIDs rewrites a catalog's services[].id,
// services[].plans[].id and services[].dashboard_client.id to the ids x
// derives, every other byte as the broker sent it.
func DeriveCatalogIDs(doc []byte, x *IDs) ([]byte, error) {
	root := jsonfast.SkipSpace(doc, 0)
	if root >= len(doc) || doc[root] != '{' || !jsonfast.Valid(doc) {
		return nil, errors.New("the catalog is not a JSON object")
	}
	var ss []splice
	derive := func(start, end int, id string) { ss = append(ss, splice{start, end, x.Derive(id)}) }
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
