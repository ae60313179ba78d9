package config

// checkMigrations checks each routes[].migrate_to: it names another
// broker, not retired, that the tenant reaches by no other route; both
// brokers keep an inventory (it says which one holds each instance), in
// a state store that outlives the gateway (with memory, a restart would
// forget that an instance is on the new broker and send its calls to the
// old one).
func checkMigrations(c *Config, probs *Problems) {
	for i := range c.Tenants {
		t := &c.Tenants[i]
		reached := map[string]string{}
		for j, rc := range t.Routes {
			if rc.Broker != "" {
				reached[rc.Broker] = joinIndex(joinIndex("tenants", i)+".routes", j) + ".broker"
			}
		}
		for j, rc := range t.Routes {
			if rc.MigrateTo == "" {
				continue
			}
			path := joinIndex(joinIndex("tenants", i)+".routes", j) + ".migrate_to"
			to := c.Broker(rc.MigrateTo)
			switch {
			case to == nil:
				probs.addf(path, "no broker is named %q: migrate_to names the broker (in brokers) that takes the route's new instances", rc.MigrateTo)
				continue
			case rc.MigrateTo == rc.Broker:
				probs.addf(path, "is the route's own broker %q: name the broker the route's new instances move to", rc.Broker)
				continue
			case to.Retired.On:
				probs.addf(path, "names broker %q, which is retired (brokers[].retired): a retired broker takes no new instances", rc.MigrateTo)
			}
			if first, dup := reached[rc.MigrateTo]; dup {
				probs.addf(path, "names broker %q, which the tenant already reaches (%s); a tenant reaches a broker once", rc.MigrateTo, first)
			} else {
				reached[rc.MigrateTo] = path
			}
			for _, name := range []string{rc.Broker, rc.MigrateTo} {
				if b := c.Broker(name); b != nil && b.Inventory.Disabled {
					probs.addf(path, "needs the inventory of broker %q, which is disabled (brokers[].inventory.disabled): the inventory says which broker holds each instance", name)
				}
			}
			if c.State.Backend == "memory" {
				probs.addf(path, "needs state.backend bolt, redis or postgres: the inventory says which broker holds each instance, and memory forgets it at a restart, after which the calls for instances on %q would go to %q", rc.MigrateTo, rc.Broker)
			}
		}
	}
}

// Brokers names the brokers that hold the route's instances: its broker
// and, while it migrates, the migrate_to broker.
func (r Route) Brokers() []string {
	if r.MigrateTo == "" {
		return []string{r.Broker}
	}
	return []string{r.Broker, r.MigrateTo}
}
