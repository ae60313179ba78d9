package config

import (
	"math"
	"strings"
)

// Scopes of a rate limit (tenants[].limits.scope,
// tenants[].routes[].limits.scope).
const (
	// LimitScopeLocal: each gateway replica keeps its own token bucket,
	// so N replicas admit N times the rate.
	LimitScopeLocal = "local"
	// LimitScopeCluster: the replicas share one bucket in the state
	// store's Redis (state.backend: redis).
	LimitScopeCluster = "cluster"
)

// Defaults of rate limits and overload protection. Each names the key it
// fills.
const (
	// DefaultLimitScope is tenants[].limits.scope and
	// tenants[].routes[].limits.scope.
	DefaultLimitScope = LimitScopeLocal
	// DefaultMaxInFlightPerCPU sizes listen.max_in_flight: this many
	// calls per GOMAXPROCS. A call costs the gateway some tens of
	// microseconds of CPU, so 256 calls per core are at most about 10 ms
	// of work queued for a core when all of them want it at once, while
	// calls that wait on slow brokers (they hold no CPU) have room: 256
	// per core is 100 calls per second per core to brokers that take
	// 2.5 s each.
	DefaultMaxInFlightPerCPU = 256
)

// Limits are token-bucket rate limits on platform calls, separately for
// mutating calls (provision, update, deprovision, bind, unbind) and reads
// (catalog, last_operation polls, GET instance and binding). A tenant's
// limits count all of its calls, on every route; a route's count the
// tenant's calls to that broker; a call must pass both where both are set.
// A call over a limit gets 429 with Retry-After and never reaches the
// broker.
type Limits struct {
	// Reads and Mutations are the buckets; nil: that class is not
	// limited. At least one is required.
	Reads     *LimitRate `yaml:"reads"`
	Mutations *LimitRate `yaml:"mutations"`
	// Scope is LimitScopeLocal (per replica) or LimitScopeCluster (one
	// bucket shared by all replicas, in the state store's Redis). Zero
	// value: DefaultLimitScope.
	Scope string `yaml:"scope" validate:"oneof=local cluster"`
}

// LimitRate is one token bucket: Burst calls at once, then Rate calls per
// second.
type LimitRate struct {
	// Rate is calls per second, fractions allowed (0.5: one call every
	// two seconds).
	Rate float64 `yaml:"rate" validate:"gt=0,lte=1000000"`
	// Burst is the bucket's size; zero value: one second's worth of Rate,
	// rounded up (DefaultBurst).
	Burst int `yaml:"burst" validate:"gte=1,lte=1000000"`
}

// DefaultBurst is the burst of a bucket of rate calls per second that
// sets none: one second's worth, rounded up, at least 1.
func DefaultBurst(rate float64) int {
	if rate <= 0 || rate > math.MaxInt32 {
		return 1
	}
	return max(1, int(math.Ceil(rate)))
}

// MaxInFlightFor is the number of platform calls served at once:
// MaxInFlight, or DefaultMaxInFlightPerCPU times gomaxprocs when it is
// zero.
func (l Listen) MaxInFlightFor(gomaxprocs int) int {
	if l.MaxInFlight > 0 {
		return l.MaxInFlight
	}
	return DefaultMaxInFlightPerCPU * max(1, gomaxprocs)
}

func (l *Limits) applyDefaults() {
	if l == nil {
		return
	}
	if l.Scope == "" {
		l.Scope = DefaultLimitScope
	}
	for _, r := range []*LimitRate{l.Reads, l.Mutations} {
		if r != nil && r.Burst == 0 {
			r.Burst = DefaultBurst(r.Rate)
		}
	}
}

// checkLimits reports what the tags cannot: a limits block with no
// bucket, and a shared limit without a Redis to share it in.
func checkLimits(c *Config, probs *Problems) {
	for i := range c.Tenants {
		t := &c.Tenants[i]
		path := joinIndex("tenants", i) + ".limits"
		checkLimit(c, t.Limits, path, probs)
		for j := range t.Routes {
			checkLimit(c, t.Routes[j].Limits, joinIndex(joinIndex("tenants", i)+".routes", j)+".limits", probs)
		}
	}
}

func checkLimit(c *Config, l *Limits, path string, probs *Problems) {
	if l == nil {
		return
	}
	if l.Reads == nil && l.Mutations == nil {
		probs.addf(path, "must set reads, mutations or both, such as {mutations: {rate: 5, burst: 10}}")
	}
	if l.Scope == LimitScopeCluster && c.State.Backend != "redis" {
		probs.addf(path+".scope", "cluster needs state.backend: redis (it is %s): the replicas share the limit in the "+
			"state store's Redis; use local for a limit per replica", strings.TrimSpace(c.State.Backend))
	}
}
