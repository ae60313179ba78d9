package protect

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// limiter is one configured token bucket: a tenant's or a route's reads or
// mutations (tenants[].limits, tenants[].routes[].limits). A local one is
// a golang.org/x/time/rate bucket of this replica; a shared one (scope
// cluster) is a GCRA bucket in Redis (sharedLimits), with the local bucket
// standing in while Redis fails.
type limiter struct {
	id     limiterID
	rate   float64
	burst  int
	scope  string
	local  *rate.Limiter
	shared *sharedLimits // nil: local
	key    string        // the shared bucket's Redis key (without redis_rate's "rate:")
	// who and key name the limit in a refusal's description.
	who, path string
}

// limiterID names a limiter across reloads: a tenant's (broker "") or a
// route's, for one class of calls.
type limiterID struct {
	tenant, broker string
	class          callClass
}

// newLimiter builds the limiter of r for id; scope is the block's.
func newLimiter(id limiterID, r *config.LimitRate, scope string, shared *sharedLimits) *limiter {
	l := &limiter{id: id, rate: r.Rate, burst: r.Burst, scope: scope,
		local: rate.NewLimiter(rate.Limit(r.Rate), r.Burst)}
	l.who, l.path = fmt.Sprintf("tenant %q", id.tenant), "tenants[].limits."+callClassNames[id.class]
	if id.broker != "" {
		l.who, l.path = fmt.Sprintf("tenant %q to broker %q", id.tenant, id.broker), "tenants[].routes[].limits."+callClassNames[id.class]
	}
	if scope == config.LimitScopeCluster {
		l.shared = shared
		l.key = shared.key(id)
	}
	return l
}

// sameAs reports whether l enforces r at scope, so that a reload keeps it
// (and the tokens it has spent).
func (l *limiter) sameAs(r *config.LimitRate, scope string) bool {
	return l.rate == r.Rate && l.burst == r.Burst && l.scope == scope
}

// token is a call's admission by one limiter, which may be given back
// when a limiter checked after it refuses the call.
type token struct {
	r  rate.Reservation // a local bucket's token (a copy: a *Reservation kept would cost an allocation)
	ok bool             // r holds one: false for none, or for a shared bucket's
	at time.Time
}

// take takes a token for one call at now. When none is left it returns
// false and how long until one is: the limiter's reservation, whose
// delay it cancels at once (a refused call takes nothing).
func (l *limiter) take(ctx context.Context, now time.Time) (token, time.Duration, bool) {
	if l.shared != nil {
		if wait, err := l.shared.take(ctx, l, now); err == nil {
			return token{}, wait, wait <= 0
		}
		// Redis failed (counted and logged): this replica's bucket stands
		// in, so a Redis outage leaves each replica its own limit.
	}
	t := token{r: *l.local.ReserveN(now, 1), ok: true, at: now}
	if d := t.r.DelayFrom(now); d > 0 {
		t.r.CancelAt(now)
		return token{}, d, false
	}
	return t, 0, true
}

// giveBack returns t to its bucket: a limit checked after it refused the
// call. A local token is cancelled as of the time it was taken. A shared
// one stays spent: redis_rate cannot take a call back (Envoy's global rate
// limit, too, counts a call against every limit it reaches).
func (t *token) giveBack() {
	if t.ok {
		t.r.CancelAt(t.at)
	}
}

// refusal is the 429 of a call this limiter refused, to be retried after
// wait.
func (l *limiter) refusal(wait time.Duration) *osb.Error {
	secs := core.RetryAfterSecs(wait)
	what, where := "reads", "on each gateway replica"
	if l.id.class == classMutations {
		what = "mutating calls"
	}
	if l.scope == config.LimitScopeCluster {
		where = "shared by all gateway replicas"
	}
	return &osb.Error{Status: http.StatusTooManyRequests, Header: core.RetryHeader(secs),
		Description: fmt.Sprintf("rate limit: %s may make %s %s per second (burst %d), %s (%s); "+
			"this call was not sent to the broker; retry after %ds",
			l.who, strconv.FormatFloat(l.rate, 'g', -1, 64), what, l.burst, where, l.path, secs)}
}

// RouteLimits are the limiters a route's calls pass, by class: the
// route's own, then its tenant's; nil where none is set.
type RouteLimits struct {
	classes [numCallClasses]classLimits
}

// limits reports whether rl limits any class.
func (rl *RouteLimits) limits() bool {
	for _, cl := range rl.classes {
		if cl.route != nil || cl.tenant != nil {
			return true
		}
	}
	return false
}

type classLimits struct {
	route, tenant *limiter
	// byRoute and byTenant count the calls each refused; nil without
	// Metrics.
	byRoute, byTenant prometheus.Counter
}

// admit takes a token from each limit the call is under, route first: a
// call the route's limit refuses spends nothing of the tenant's, and one
// the tenant's refuses gives the route's (local) token back.
func (rl *RouteLimits) admit(ctx context.Context, c callClass, now time.Time) error {
	cl := &rl.classes[c]
	var first token
	if cl.route != nil {
		t, wait, ok := cl.route.take(ctx, now)
		if !ok {
			core.Count(cl.byRoute)
			return cl.route.refusal(wait)
		}
		first = t
	}
	if cl.tenant != nil {
		if _, wait, ok := cl.tenant.take(ctx, now); !ok {
			first.giveBack()
			core.Count(cl.byTenant)
			return cl.tenant.refusal(wait)
		}
	}
	return nil
}

// WithRateLimit is the rate-limit stage. It sits right after the classify
// stage, which tells reads from mutating calls, and before anything that
// costs (validation, the catalog, the lock, the broker): a catalog
// answered from the cache is a read like any other. Without limits in the
// configuration the stage is left out (nil Middleware) and costs nothing.
func WithRateLimit(p *Protection) core.Middleware {
	if !p.limited {
		return nil
	}
	now := p.now
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if rl := limitsOf(s.Route); rl != nil {
				if err := rl.admit(r.Context(), classOf(s.Call.Endpoint), now()); err != nil {
					s.Protection = ProtectionRateLimit
					s.Fail(w, err)
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
}

// limitsOf is the route's part of this feature (core.Route); nil: none.
func limitsOf(rt *core.Route) *RouteLimits { l, _ := rt.Limits.(*RouteLimits); return l }
