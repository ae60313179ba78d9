package protect

import (
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/redis"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Protections, as Scope.Protection names them on audit records and access
// lines: what answered a call in the broker's place to protect the broker,
// the other tenants or the gateway.
const (
	// ProtectionRateLimit: a tenant's or route's rate limit
	// (tenants[].limits, tenants[].routes[].limits) refused the call.
	ProtectionRateLimit = "rate_limit"
	// ProtectionOverload: listen.max_in_flight calls were in flight.
	ProtectionOverload = "overload"
)

// callClass is what the protections count a call as (core.CallClass).
type callClass = core.CallClass

const (
	classReads     = core.ClassReads
	classMutations = core.ClassMutations
	numCallClasses = callClass(core.NumCallClasses)
)

// callClassNames label the metrics and name the config keys.
var callClassNames = core.CallClassNames

// classOf is the class of a classified call.
func classOf(e rules.Endpoint) callClass {
	if e.Mutating() {
		return classMutations
	}
	return classReads
}

// methodClass is the class of a call not classified yet, by its method
// alone: GET and HEAD are reads, everything else may change state.
func methodClass(method string) callClass {
	if method == http.MethodGet || method == http.MethodHead {
		return classReads
	}
	return classMutations
}

// Protection is what a Gateway protects itself, the brokers and the
// tenants with: the overload gate and the rate limits. A reload keeps the
// in-flight count, and each limiter whose settings did not change, with
// the tokens it has spent.
type Protection struct {
	Overload *Overload
	limiters map[limiterID]*limiter
	shared   *sharedLimits // nil: no shared limit, or no Redis
	limited  bool          // some route is under a limit
	now      func() time.Time
}

// ProtectionOptions are what NewProtection needs besides the
// configuration: the clock, the log, the metrics and the protections of the
// Gateway being replaced (nil: none).
type ProtectionOptions struct {
	Now      func() time.Time
	Logger   *slog.Logger
	Metrics  *metrics.Metrics
	Previous *Protection
}

// NewProtection builds the protections of cfg and attaches to each route
// its limits and shed counters. st is the Gateway's state store: shared
// limits need it to be the redis backend.
func NewProtection(cfg *config.Config, routes map[string]*core.Route, st store.Store, opts ProtectionOptions) (*Protection, error) {
	prev := opts.Previous
	p := &Protection{limiters: map[limiterID]*limiter{}, now: opts.Now}
	var prevOverload *Overload
	if prev != nil {
		prevOverload = prev.Overload
	}
	p.Overload = newOverload(cfg.Listen, prevOverload)
	m := opts.Metrics
	for i := range cfg.Tenants {
		tc := &cfg.Tenants[i]
		for _, rc := range tc.Routes {
			rt := routes[rc.Prefix]
			for c := range numCallClasses {
				rt.Shed[c] = m.ShedCounter(tc.Name, rc.Broker, c)
			}
			var rl RouteLimits
			for c := range numCallClasses {
				cl := &rl.classes[c]
				var err error
				if cl.tenant, err = p.limiter(limiterID{tenant: tc.Name, class: c}, tc.Limits, st, prev, opts); err != nil {
					return nil, err
				}
				if cl.route, err = p.limiter(limiterID{tenant: tc.Name, broker: rc.Broker, class: c}, rc.Limits, st, prev, opts); err != nil {
					return nil, err
				}
				if cl.tenant != nil {
					cl.byTenant = m.LimitedCounter(tc.Name, rc.Broker, c, "tenant")
				}
				if cl.route != nil {
					cl.byRoute = m.LimitedCounter(tc.Name, rc.Broker, c, "route")
				}
			}
			if rl.limits() {
				rt.Limits, p.limited = &rl, true
			}
		}
	}
	return p, nil
}

// limiter returns the limiter of the bucket id in the limits block l: the
// same one for every route of a tenant, taken over from prev when its
// settings did not change; nil when l does not limit id's class.
func (p *Protection) limiter(id limiterID, l *config.Limits, st store.Store, prev *Protection, opts ProtectionOptions) (*limiter, error) {
	if l == nil {
		return nil, nil
	}
	r := l.Reads
	if id.class == classMutations {
		r = l.Mutations
	}
	if r == nil {
		return nil, nil
	}
	if lim := p.limiters[id]; lim != nil {
		return lim, nil
	}
	if l.Scope == config.LimitScopeCluster && p.shared == nil {
		client, prefix, ok := redis.ClientOf(st)
		if !ok {
			return nil, fmt.Errorf("tenant %q: limits.scope cluster needs the redis state store (state.backend: redis)", id.tenant)
		}
		if prev != nil && prev.shared != nil && prev.shared.client == client {
			p.shared = prev.shared
		} else {
			p.shared = newSharedLimits(client, prefix, opts.Now, opts.Logger, opts.Metrics)
		}
	}
	var lim *limiter
	if prev != nil {
		if old := prev.limiters[id]; old != nil && old.sameAs(r, l.Scope) && (old.shared == nil || old.shared == p.shared) {
			lim = old
		}
	}
	if lim == nil {
		lim = newLimiter(id, r, l.Scope, p.shared)
	}
	p.limiters[id] = lim
	return lim, nil
}

// Limiters is the number of rate limiters the protections hold.
func (p *Protection) Limiters() int { return len(p.limiters) }
