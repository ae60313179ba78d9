package config

import (
	"fmt"
	"net/url"
	pathpkg "path"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// nameRE is what tenant and broker names look like: a DNS label in lower
// case, so that they can stand in URL paths, metric labels and file names.
var nameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)

// validName reports whether s is a valid tenant or broker name.
func validName(s string) bool { return nameRE.MatchString(s) }

// checkFields runs the checks that span fields or need more than a struct
// tag. Values already reported (empty names, say) are skipped.
func checkFields(c *Config, probs *Problems) {
	checkNames(c, probs)
	checkRoutes(c, probs)
	checkPrefixes(c, probs)
	for i := range c.Brokers {
		b := &c.Brokers[i]
		path := joinIndex("brokers", i)
		if b.URL != "" {
			if msg := checkBrokerURL(b.URL); msg != "" {
				probs.addf(path+".url", "%s", msg)
			}
		}
		checkVersions(b.APIVersion, path+".api_version", probs)
		checkCatalogRetry(b.Catalog, path+".catalog", probs)
	}
	checkWriteTimeout(c, probs)
	checkFilters(c, probs)
	checkState(c, probs)
	for i := range c.Brokers {
		if _, err := ParseSchedule(c.Brokers[i].OrphanSchedule); err != nil {
			probs.addf(joinIndex("brokers", i)+".orphan_schedule", "%v", err)
		}
	}
	checkTLS(c, probs)            // listen_tls.go
	checkTrustedProxies(c, probs) // proxies.go
	checkTelemetry(c, probs)
	checkInventory(c, probs)       // inventory.go
	checkLimits(c, probs)          // limits.go
	checkQuotas(c, probs)          // quota.go
	checkPolicies(c, probs)        // policies.go
	checkMigrations(c, probs)      // migrate.go
	checkProtect(c, probs)         // protect.go
	checkRuntime(c.Runtime, probs) // runtime.go
}

const nameRule = `must be lower-case letters, digits and inner "-", such as "cf-prod"`

// checkNames checks that tenant and broker names are valid and unique.
func checkNames(c *Config, probs *Problems) {
	tenants := make(map[string]int)
	for i, t := range c.Tenants {
		checkName(t.Name, joinIndex("tenants", i), "tenants", tenants, i, probs)
	}
	brokers := make(map[string]int)
	for i, b := range c.Brokers {
		checkName(b.Name, joinIndex("brokers", i), "brokers", brokers, i, probs)
	}
}

func checkName(name, path, list string, seen map[string]int, i int, probs *Problems) {
	if name == "" {
		return // "is required" already
	}
	if !validName(name) {
		probs.addf(path+".name", nameRule)
		return
	}
	if first, dup := seen[name]; dup {
		probs.addf(path+".name", "%q is already the name of %s", name, joinIndex(list, first))
		return
	}
	seen[name] = i
}

// checkRoutes checks that each route names a broker that exists, and no
// tenant routes to a broker twice but through routes that show ids of
// their own (checkRouteIDs).
func checkRoutes(c *Config, probs *Problems) {
	var known []string
	for _, b := range c.Brokers {
		if validName(b.Name) && !slices.Contains(known, b.Name) {
			known = append(known, b.Name)
		}
	}
	for i, t := range c.Tenants {
		routed := make(map[string]int)
		for j, r := range t.Routes {
			path := joinIndex(joinKey(joinIndex("tenants", i), "routes"), j) + ".broker"
			if r.Broker == "" {
				continue
			}
			if c.Broker(r.Broker) == nil {
				probs.addf(path, "no broker is named %q (brokers: %s)", r.Broker, strings.Join(known, ", "))
				continue
			}
			if _, dup := routed[r.Broker]; dup {
				continue // allowed only between routes with ids of their own: checkRouteIDs
			}
			routed[r.Broker] = j
		}
	}
	checkRouteIDs(c, probs) // routeids.go
}

// checkPrefixes checks each route prefix and that no prefix equals or
// encloses another, across all tenants.
func checkPrefixes(c *Config, probs *Problems) {
	type placed struct{ prefix, path string }
	var good []placed
	for i, t := range c.Tenants {
		for j, r := range t.Routes {
			path := joinIndex(joinKey(joinIndex("tenants", i), "routes"), j) + ".prefix"
			if r.Prefix == "" {
				continue // no valid default: the names are reported
			}
			if msg := checkPrefix(r.Prefix); msg != "" {
				probs.addf(path, "%q %s", r.Prefix, msg)
				continue
			}
			for _, g := range good {
				switch {
				case g.prefix == r.Prefix:
					probs.addf(path, "%q is also the prefix of %s", r.Prefix, strings.TrimSuffix(g.path, ".prefix"))
				case isAncestor(g.prefix, r.Prefix):
					probs.addf(path, "%q is inside %q (%s); prefixes must not nest", r.Prefix, g.prefix, g.path)
				case isAncestor(r.Prefix, g.prefix):
					probs.addf(path, "%q encloses %q (%s); prefixes must not nest", r.Prefix, g.prefix, g.path)
				}
			}
			good = append(good, placed{r.Prefix, path})
		}
	}
}

// checkPrefix returns what is wrong with a route prefix, or "".
func checkPrefix(p string) string {
	if !strings.HasPrefix(p, "/") {
		return `must start with "/"`
	}
	if strings.HasSuffix(p, "/") {
		return `must not end with "/"`
	}
	if strings.Contains(p, "//") {
		return `must not contain "//"`
	}
	for i := 0; i < len(p); i++ {
		if !isPrefixChar(p[i]) {
			return `may hold only letters, digits, "-", ".", "_", "~" and "/"`
		}
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		switch seg {
		case ".", "..":
			return `must not contain "." or ".." segments`
		case "v2":
			return `must not contain a "v2" segment: the gateway matches <prefix>/v2/... itself`
		}
	}
	return ""
}

func isPrefixChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~' || c == '/'
}

// isAncestor reports whether clean prefix a is a segment-wise ancestor of
// b: "/a" of "/a/b", but not of "/ab".
func isAncestor(a, b string) bool {
	return strings.HasPrefix(b, a+"/")
}

// checkBrokerURL returns what is wrong with a broker URL, or "". It never
// quotes the URL, which may hold a password.
func checkBrokerURL(s string) string {
	const want = "must be an absolute http or https URL"
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") {
		return want
	}
	switch {
	case u.Opaque != "" || u.Host == "":
		return want + " with a host"
	case u.User != nil:
		return "must not hold credentials; put them in username and password (or password_file)"
	case u.RawQuery != "" || u.ForceQuery:
		return "must not have a query"
	case u.Fragment != "" || strings.Contains(s, "#"):
		return "must not have a fragment"
	}
	return ""
}

// checkVersions checks a broker's API version range: major 2, from 2.0 to
// osb.Latest, min not above max.
func checkVersions(r VersionRange, path string, probs *Problems) {
	ok := true
	for _, v := range []struct {
		key string
		ver osb.Version
	}{{"min", r.Min}, {"max", r.Max}} {
		switch {
		case v.ver.Major != 2:
			probs.addf(path+"."+v.key, "%s is not an OSB API version: the major version must be 2", v.ver)
			ok = false
		case osb.Latest.Less(v.ver):
			probs.addf(path+"."+v.key, "%s is newer than %s, the newest version the gateway understands", v.ver, osb.Latest)
			ok = false
		}
	}
	if ok && r.Max.Less(r.Min) {
		probs.addf(path, "min %s is above max %s", r.Min, r.Max)
	}
}

// checkWriteTimeout checks that the listener's write timeout leaves every
// broker its whole timeout to answer. It names the broker with the longest
// timeout; brokers whose timeout is already reported are left out.
func checkWriteTimeout(c *Config, probs *Problems) {
	longest := -1
	for i, b := range c.Brokers {
		if probs.seen[joinIndex("brokers", i)+".timeout"] {
			continue // out of range already
		}
		if b.Timeout > c.Listen.WriteTimeout && (longest < 0 || b.Timeout > c.Brokers[longest].Timeout) {
			longest = i
		}
	}
	if longest < 0 {
		return
	}
	probs.addf("listen.write_timeout", "%s is shorter than %s (%s); the responses of slow calls would be cut off",
		c.Listen.WriteTimeout, joinIndex("brokers", longest)+".timeout", c.Brokers[longest].Timeout)
}

// checkFilters checks that every catalog filter pattern is a valid glob.
func checkFilters(c *Config, probs *Problems) {
	for i, t := range c.Tenants {
		for j, r := range t.Routes {
			path := joinIndex(joinIndex("tenants", i)+".routes", j)
			for _, f := range []struct {
				name   string
				filter Filter
			}{{"services", r.Services}, {"plans", r.Plans}} {
				for _, l := range []struct {
					name string
					pats []string
				}{{"allow", f.filter.Allow}, {"deny", f.filter.Deny}} {
					for k, pat := range l.pats {
						if _, err := pathpkg.Match(pat, ""); err != nil || pat == "" {
							probs.addf(joinIndex(path+"."+f.name+"."+l.name, k), "%q is not a glob pattern (use *, ? and [a-z])", pat)
						}
					}
				}
			}
		}
	}
}

// ParseSchedule parses a comma-separated list of positive durations.
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for part := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("must be comma-separated positive durations such as %q", DefaultOrphanSchedule)
		}
		out = append(out, d)
	}
	return out, nil
}

// checkCatalogRetry checks that the cap of the catalog fetch backoff is not
// below its first wait (values out of range are reported already).
func checkCatalogRetry(c BrokerCatalog, path string, probs *Problems) {
	if probs.seen[path+".retry_interval"] || probs.seen[path+".retry_max_interval"] {
		return
	}
	if c.RetryMaxInterval < c.RetryInterval {
		probs.addf(path+".retry_max_interval", "%s is shorter than retry_interval (%s); the wait after a failed fetch starts at retry_interval and doubles up to retry_max_interval",
			c.RetryMaxInterval, c.RetryInterval)
	}
}
