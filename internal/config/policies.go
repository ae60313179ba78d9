package config

import (
	"github.com/osb-gateway/osb-gateway/internal/policy"
)

// checkPolicies compiles every policy (top level, per tenant, per route)
// with the variables' types and refuses one that does not compile, names an
// unknown variable, may cost more than policy.MaxCost, or has another
// problem (policy.Compile), at the key it is in with CEL's own message;
// and a policy whose name another one a call may meet already has, or
// whose match names a broker there is none of.
func checkPolicies(c *Config, probs *Problems) {
	check := func(path string, ps []policy.Spec) {
		for i := range ps {
			p := joinIndex(path, i)
			if _, list := policy.Compile(ps[i]); len(list) > 0 {
				for _, pr := range list {
					probs.addf(p+"."+pr.Field, "%s", pr.Message)
				}
			}
			for _, b := range ps[i].Match.Brokers {
				if c.Broker(b) == nil {
					probs.addf(p+".match.brokers", "names broker %q, which is not in brokers", b)
				}
			}
		}
	}
	check("policies", c.Policies)
	for i := range c.Tenants {
		t := &c.Tenants[i]
		tpath := joinIndex("tenants", i)
		check(tpath+".policies", t.Policies)
		for r := range t.Routes {
			rpath := joinIndex(tpath+".routes", r)
			check(rpath+".policies", t.Routes[r].Policies)
			seen := map[string]string{}
			note := func(path string, ps []policy.Spec) {
				for j, s := range ps {
					p := joinIndex(path, j)
					if first, dup := seen[s.Name]; dup && s.Name != "" && first != p {
						probs.addf(p+".name", "names the policy %q again (first at %s), which the calls of %s meet too: give one a distinct name",
							s.Name, first, rpath)
					} else if !dup {
						seen[s.Name] = p
					}
				}
			}
			note("policies", c.Policies)
			note(tpath+".policies", t.Policies)
			note(rpath+".policies", t.Routes[r].Policies)
		}
	}
}

// PoliciesOf returns the policies a route's calls meet, in the order they
// apply: the top-level ones, the tenant's, the route's.
func (c *Config) PoliciesOf(t *Tenant, r *Route) []policy.Spec {
	out := make([]policy.Spec, 0, len(c.Policies)+len(t.Policies)+len(r.Policies))
	out = append(out, c.Policies...)
	out = append(out, t.Policies...)
	return append(out, r.Policies...)
}
