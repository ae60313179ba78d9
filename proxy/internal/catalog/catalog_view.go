package catalog

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
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Filter is a tenant's view of one broker's catalog, from the
// route's services and plans filters. The zero value shows everything.
type Filter struct {
	services, plans config.Filter
	// key identifies the filter's patterns, so views of equal filters are
	// shared between tenants and survive reloads.
	Key string
}

func NewFilter(r config.Route) *Filter {
	if r.Services.Empty() && r.Plans.Empty() {
		return nil
	}
	b, _ := json.Marshal([]config.Filter{r.Services, r.Plans})
	return &Filter{services: r.Services, plans: r.Plans, Key: string(b)}
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

func (f *Filter) ServiceVisible(s *osb.Service) bool {
	return f == nil || visible(f.services, s.Name, s.ID)
}

func (f *Filter) PlanVisible(s *osb.Service, p *osb.Plan) bool {
	return f == nil || (f.ServiceVisible(s) && visible(f.plans, p.Name, p.ID, s.Name+"/"+p.Name))
}

// TenantView is what one tenant filter makes of one catalog entry: the
// bytes to serve and their ETag, encoded once per catalog version.
type TenantView struct {
	Body   []byte
	Etag   []string
	Length []string // Content-Length
}

// NewTenantView returns the view of body with its ETag.
func NewTenantView(body []byte, etag []string) *TenantView {
	return &TenantView{Body: body, Etag: etag, Length: []string{strconv.Itoa(len(body))}}
}

// view returns the bytes a route serves: the broker's own bytes without a
// filter, else the catalog without what the filter hides (rules.Index.View:
// the broker's bytes but for the services and plans dropped), built once
// and kept with the entry.
func (e *Entry) view(f *Filter) (*TenantView, error) {
	if f == nil {
		return e.plain, nil
	}
	if v, ok := e.Views.Load(f.Key); ok {
		return v.(*TenantView), nil
	}
	body, err := e.Rules.View(f.ServiceVisible, f.PlanVisible)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	v := NewTenantView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.Views.LoadOrStore(f.Key, v)
	return actual.(*TenantView), nil
}

// ViewFor is view, and with advertise (brokers[].emulate.advertise) the
// view with instances_retrievable and bindings_retrievable set
// (rules.Advertise), built once per filter and kept with the entry.
func (e *Entry) ViewFor(f *Filter, advertise bool) (*TenantView, error) {
	base, err := e.view(f)
	if err != nil || !advertise {
		return base, err
	}
	key := "advertise\x00"
	if f != nil {
		key += f.Key
	}
	if v, ok := e.Views.Load(key); ok {
		return v.(*TenantView), nil
	}
	body, err := rules.Advertise(base.Body)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	v := NewTenantView(body, []string{`"` + hex.EncodeToString(sum[:16]) + `"`})
	actual, _ := e.Views.LoadOrStore(key, v)
	return actual.(*TenantView), nil
}

// CheckVisible refuses a provision, update or bind for a service or plan
// the tenant's filter hides, naming it. Ids the catalog does not know are
// left to the validation rules.
func CheckVisible(f *Filter, e *Entry, tenant, serviceID, planID string) error {
	if f == nil || e == nil {
		return nil
	}
	cat := e.Rules.Catalog()
	for i := range cat.Services {
		s := &cat.Services[i]
		if s.ID != serviceID {
			continue
		}
		if !f.ServiceVisible(s) {
			return osb.Errorf(http.StatusBadRequest, "", "service_id %q (service %q) is not available to tenant %q", serviceID, s.Name, tenant)
		}
		for j := range s.Plans {
			p := &s.Plans[j]
			if p.ID == planID && !f.PlanVisible(s, p) {
				return osb.Errorf(http.StatusBadRequest, "", "plan_id %q (plan %q of service %q) is not available to tenant %q", planID, p.Name, s.Name, tenant)
			}
		}
	}
	return nil
}

// EtagMatch reports whether an If-None-Match header value lists etag
// ("*" matches any; weak validators compare by their opaque tag).
func EtagMatch(header, etag string) bool {
	for part := range strings.SplitSeq(header, ",") {
		part = strings.TrimSpace(part)
		if part == "*" || strings.TrimPrefix(part, "W/") == etag {
			return true
		}
	}
	return false
}

// Index implements core.Catalog.
func (e *Entry) Index() *rules.Index { return e.Rules }

// Of is the catalog the validate stage checked s's call against
// (Scope.Catalog); nil when it had none.
func Of(s *core.Scope) *Entry { e, _ := s.Catalog.(*Entry); return e }

func FilterOf(rt *core.Route) *Filter { f, _ := rt.Filter.(*Filter); return f }
