package config

// Quota caps the service instances a tenant holds (tenants[].quotas: on
// every broker the tenant reaches) or holds through one route
// (tenants[].routes[].quotas: on that route's broker). A provision that
// would exceed it is refused before the broker is called.
type Quota struct {
	// Name names the quota in refusals and in the osb_gateway_quota_used
	// metric; zero value: "<service>/<plan>", "*" for either left out
	// (Label).
	Name string `yaml:"name" validate:"max=63"`
	// Service and Plan select the instances counted, each by catalog name
	// or id; empty: any. A plan name alone matches that plan name in any
	// service.
	Service string `yaml:"service"`
	Plan    string `yaml:"plan"`
	// MaxInstances is how many such instances the tenant may hold; 0
	// admits none. Required.
	MaxInstances *int `yaml:"max_instances" validate:"required,gte=0"`
}

// Label is q's name in refusals and metrics: Name, else
// "<service>/<plan>" with "*" for either left out.
func (q Quota) Label() string {
	if q.Name != "" {
		return q.Name
	}
	star := func(s string) string {
		if s == "" {
			return "*"
		}
		return s
	}
	return star(q.Service) + "/" + star(q.Plan)
}

// Max is q's max_instances (0 when unset, which validation refuses).
func (q Quota) Max() int {
	if q.MaxInstances == nil {
		return 0
	}
	return *q.MaxInstances
}

// checkQuotas refuses two quotas of one tenant with the same label: the
// metric and the refusals could not tell them apart.
func checkQuotas(c *Config, probs *Problems) {
	for i := range c.Tenants {
		t := &c.Tenants[i]
		seen := map[string]string{}
		note := func(path string, q Quota) {
			if first, dup := seen[q.Label()]; dup {
				probs.addf(path, "names the quota %q again (first at %s): give one of them a distinct name", q.Label(), first)
				return
			}
			seen[q.Label()] = path
		}
		tpath := joinIndex("tenants", i)
		for j, q := range t.Quotas {
			note(joinIndex(tpath+".quotas", j), q)
			for _, rc := range t.Routes {
				noInventory(c, joinIndex(tpath+".quotas", j), rc.Broker, probs)
			}
		}
		for r, rc := range t.Routes {
			for j, q := range rc.Quotas {
				noInventory(c, joinIndex(joinIndex(tpath+".routes", r)+".quotas", j), rc.Broker, probs)
				if q.Name == "" {
					q.Name = rc.Broker + ":" + q.Label()
				}
				note(joinIndex(joinIndex(tpath+".routes", r)+".quotas", j), q)
			}
		}
	}
}

// noInventory refuses a quota counted on a broker whose inventory is off:
// there would be nothing to count.
func noInventory(c *Config, path, broker string, probs *Problems) {
	for i := range c.Brokers {
		if c.Brokers[i].Name == broker && c.Brokers[i].Inventory.Disabled {
			probs.addf(path, "counts instances of broker %q, whose inventory is disabled (brokers[%d].inventory.disabled): the gateway would have nothing to count", broker, i)
		}
	}
}
