package quota

import (
	"context"
	"fmt"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Warnings names the quotas whose service or plan matches nothing in
// the catalogs of the brokers they count on: such a quota counts nothing
// and refuses nothing (a typo, or an offering renamed). Catalogs are read
// from the cache, fetched when missing; a broker whose catalog cannot be
// had is left out, and a quota none of whose brokers' catalogs could be
// had draws no warning. osb-gateway check prints them.
func Warnings(ctx context.Context, g *guard.Guard) []string {
	indexes := map[string]*rules.Index{}
	indexOf := func(broker string) *rules.Index {
		if ix, ok := indexes[broker]; ok {
			return ix
		}
		var ix *rules.Index
		if u := g.Upstreams[broker]; u != nil {
			key := catalog.Key{Broker: u.Name, Version: u.WarmVersion().String()}
			if e, err := g.Catalogs.Load(ctx, catalog.Fetch{Up: u, Key: key, ReqID: core.NewRequestID()}, nil); err == nil {
				ix = e.Rules
			}
		}
		indexes[broker] = ix
		return ix
	}
	var out []string
	check := func(path string, q config.Quota, brokers []string) {
		if q.Service == "" && q.Plan == "" {
			return
		}
		seen, found := false, false
		for _, b := range brokers {
			if ix := indexOf(b); ix != nil {
				seen = true
				found = found || quotaNamesSomething(ix, q)
			}
		}
		if seen && !found {
			out = append(out, fmt.Sprintf("%s: %s names nothing in the catalog of broker %s, so the quota counts nothing: check the names (or ids)",
				path, quotaWhat(q), strings.Join(quoteAll(brokers), ", ")))
		}
	}
	for i, tc := range g.Cfg.Tenants {
		var all []string
		for _, rc := range tc.Routes {
			all = append(all, rc.Brokers()...)
		}
		for j, q := range tc.Quotas {
			check(fmt.Sprintf("tenants[%d].quotas[%d]", i, j), q, all)
		}
		for r, rc := range tc.Routes {
			for j, q := range rc.Quotas {
				check(fmt.Sprintf("tenants[%d].routes[%d].quotas[%d]", i, r, j), q, rc.Brokers())
			}
		}
	}
	return out
}

// quotaNamesSomething reports whether a plan of ix matches q's service and
// plan.
func quotaNamesSomething(ix *rules.Index, q config.Quota) bool {
	rule := &Rule{Service: q.Service, Plan: q.Plan}
	for _, s := range ix.Catalog().Services {
		for _, p := range s.Plans {
			if rule.Matches(ix, s.ID, p.ID) {
				return true
			}
		}
	}
	return false
}

// quotaWhat says what q selects, for a warning.
func quotaWhat(q config.Quota) string {
	switch {
	case q.Service != "" && q.Plan != "":
		return fmt.Sprintf("service %q with plan %q", q.Service, q.Plan)
	case q.Service != "":
		return fmt.Sprintf("service %q", q.Service)
	}
	return fmt.Sprintf("plan %q", q.Plan)
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}
