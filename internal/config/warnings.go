package config

import "fmt"

// MinPlainPasswordLength is the shortest plain-text tenant password that
// does not draw a warning: a platform credential is a machine's secret,
// and one a person could guess is a gap (bcrypt hashes are not judged:
// their strength is not visible).
const MinPlainPasswordLength = 12

// Warnings returns what in a valid configuration deserves an operator's
// attention without being an error, one line each, naming the YAML path
// and never a secret: plain-text tenant passwords shorter than
// MinPlainPasswordLength; a runtime.heap_floor the runtime.memory_limit
// keeps the heap from reaching. The gateway logs them at start and on reload;
// check prints them.
func Warnings(c *Config) []string {
	var out []string
	for i := range c.Tenants {
		for j, cr := range c.Tenants[i].Credentials {
			if cr.IsBcrypt() {
				continue
			}
			if n := len([]rune(cr.Password.Reveal())); n < MinPlainPasswordLength {
				out = append(out, fmt.Sprintf("%s.password: a plain-text password shorter than %[3]d characters (it has %[2]d) is easy to guess; use %[3]d or more (or a bcrypt hash: osb-gateway hash-password)",
					joinIndex(joinKey(joinIndex("tenants", i), "credentials"), j), n, MinPlainPasswordLength))
			}
		}
	}
	out = append(out, sharedWithoutInventory(c)...)
	return append(out, runtimeWarnings(c.Runtime)...) // runtime.go
}

// sharedWithoutInventory warns of each broker several tenants reach whose
// inventory is disabled: the gateway cannot tell whose its instances are,
// so it cannot keep one tenant off another's (docs/security.md).
func sharedWithoutInventory(c *Config) []string {
	var out []string
	for i := range c.Brokers {
		b := &c.Brokers[i]
		if !b.Inventory.Disabled {
			continue
		}
		if tenants := c.TenantsReaching(b.Name); len(tenants) > 1 {
			out = append(out, fmt.Sprintf("%s.inventory.disabled: tenants %q all reach broker %q, and without its inventory the gateway cannot tell which tenant owns an instance, so any of them can reach the others' instances; keep the inventory on",
				joinIndex("brokers", i), tenants, b.Name))
		}
	}
	return out
}
