package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// catalogFilter is a tenant's view of one broker's catalog, from the
// route's services and plans filters. The zero value shows everything.
type catalogFilter struct {
	services, plans config.Filter
	// key identifies the filter's patterns, so views of equal filters are
	// shared between tenants and survive reloads.
	key string
}

func newCatalogFilter(r config.Route) *catalogFilter {
	if r.Services.Empty() && r.Plans.Empty() {
		return nil
	}
	b, _ := json.Marshal([]config.Filter{r.Services, r.Plans})
	return &catalogFilter{services: r.Services, plans: r.Plans, key: string(b)}
}

// visible reports whether an item known by names passes the filter.
func visible(f config.Filter, names ...string) bool {
	match := func(pats []string) bool {
		for _, p := range pats {
			for _, n := range names {
				if ok, _ := path.Match(p, n); ok && n != "" {
					return true
				}
			}
		}
		return false
	}
	if len(f.Allow) > 0 && !match(f.Allow) {
		return false
	}
	return !match(f.Deny)
}

func (f *catalogFilter) serviceVisible(s *osb.Service) bool {
	return f == nil || visible(f.services, s.Name, s.ID)
}

func (f *catalogFilter) planVisible(s *osb.Service, p *osb.Plan) bool {
	return f == nil || (f.serviceVisible(s) && visible(f.plans, p.Name, p.ID, s.Name+"/"+p.Name))
}

// catalogView is what one tenant filter makes of one catalog entry: the
// bytes to serve and their ETag, encoded once per catalog version.
type catalogView struct {
	body   []byte
	etag   []string
	length []string // Content-Length
}

// newCatalogView returns the view of body with its ETag.
func newCatalogView(body []byte, etag []string) *catalogView {
	return &catalogView{body: body, etag: etag, length: []string{strconv.Itoa(len(body))}}
}

// view returns the bytes a route serves: the broker's own bytes without a
// filter, else the catalog without what the filter hides (rules.Index.View:
// the broker's bytes but for the services and plans dropped), built once
// and kept with the entry.
func (e *catalogEntry) view(f *catalogFilter) (*catalogView, error) {
	if f == nil {
		return e.plain, nil
	}
	if v, ok := e.views.Load(f.key); ok {
		return v.(*catalogView), nil
	}
	body, err := e.index.View(f.serviceVisible, f.planVisible)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	v := newCatalogView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.views.LoadOrStore(f.key, v)
	return actual.(*catalogView), nil
}

// viewFor is view, and with advertise (brokers[].emulate.advertise) the
// view with instances_retrievable and bindings_retrievable set
// (rules.Advertise), built once per filter and kept with the entry.
func (e *catalogEntry) viewFor(f *catalogFilter, advertise bool) (*catalogView, error) {
	base, err := e.view(f)
	if err != nil || !advertise {
		return base, err
	}
	key := "advertise\x00"
	if f != nil {
		key += f.key
	}
	if v, ok := e.views.Load(key); ok {
		return v.(*catalogView), nil
	}
	body, err := rules.Advertise(base.body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	v := newCatalogView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.views.LoadOrStore(key, v)
	return actual.(*catalogView), nil
}

// checkVisible refuses a provision, update or bind for a service or plan
// the tenant's filter hides, naming it. Ids the catalog does not know are
// left to the validation rules.
func checkVisible(f *catalogFilter, e *catalogEntry, tenant, serviceID, planID string) error {
	if f == nil || e == nil {
		return nil
	}
	cat := e.index.Catalog()
	for i := range cat.Services {
		s := &cat.Services[i]
		if s.ID != serviceID {
			continue
		}
		if !f.serviceVisible(s) {
			return osb.Errorf(http.StatusBadRequest, "", "service_id %q (service %q) is not available to tenant %q", serviceID, s.Name, tenant)
		}
		for j := range s.Plans {
			p := &s.Plans[j]
			if p.ID == planID && !f.planVisible(s, p) {
				return osb.Errorf(http.StatusBadRequest, "", "plan_id %q (plan %q of service %q) is not available to tenant %q", planID, p.Name, s.Name, tenant)
			}
		}
	}
	return nil
}

// etagMatch reports whether an If-None-Match header value lists etag
// ("*" matches any; weak validators compare by their opaque tag).
func etagMatch(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

// Index implements core.Catalog.
func (e *catalogEntry) Index() *rules.Index { return e.index }

// catalogOf is the catalog the validate stage checked s's call against
// (core.Scope.Catalog); nil when it had none.
func catalogOf(s *Scope) *catalogEntry { e, _ := s.Catalog.(*catalogEntry); return e }
