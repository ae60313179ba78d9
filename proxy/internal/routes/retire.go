package routes

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// EmulatedRetired is Scope.Emulated for the 410 Gone the gateway answers
// to an unbind or deprovision of a broker retired with answer: gone.
const EmulatedRetired = core.EmulatedRetired

// OutcomeRetired is the outcome of such an answer (Scope.Outcome): the
// gateway answered for a broker that is gone, and dropped the instance or
// binding from the inventory.
const OutcomeRetired = core.OutcomeRetired

// retiredStatus is what a provision or bind (and, with answer: gone, an
// update) of a retired broker gets. 422, not 410: Cloud Controller shows a
// 422's description to the user as the broker's error and leaves nothing
// behind (no orphan mitigation), while a 410 to a provision or bind is an
// answer the specification does not define for them.
const retiredStatus = http.StatusUnprocessableEntity

// anyRetired reports whether a broker of cfg is retired.
func anyRetired(cfg *config.Config) bool {
	for i := range cfg.Brokers {
		if cfg.Brokers[i].Retired.On {
			return true
		}
	}
	return false
}

// WithRetire refuses, after classification and before anything costs a
// lock or a broker call, what a retired broker (brokers[].retired) no
// longer takes: provisions and binds, and with answer: gone updates too.
// nil when no broker is retired: the stage costs nothing then.
func WithRetire(cfg *config.Config) core.Middleware {
	if !anyRetired(cfg) {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if err := retiredRefusal(upstream.Of(s.Route), s.Call); err != nil {
				s.Fail(w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// retiredRefusal is the refusal of call c to u when u is retired and no
// longer takes it; nil otherwise.
func retiredRefusal(u *upstream.Upstream, c rules.Call) error {
	rt := u.Cfg.Retired
	if !rt.On {
		return nil
	}
	name := strconv.Quote(u.Name)
	switch c.Endpoint {
	case rules.Provision, rules.Bind:
	case rules.Update:
		if !rt.Gone() {
			return nil
		}
		return &osb.Error{Status: retiredStatus, Description: "broker " + name +
			" is retired and gone: an update of its instances cannot be made; delete the instance (the gateway answers for the broker) and create it on another service offering"}
	default:
		return nil
	}
	what := "create service instances"
	if c.Endpoint == rules.Bind {
		what = "create service bindings"
	}
	return &osb.Error{Status: retiredStatus, Description: "broker " + name +
		" is retired: it takes no new request to " + what + "; the operator retired it (brokers[].retired), so use another service offering, and unbind and delete what it holds"}
}

// WithRetiredGone answers, under the call's lock (after the guard), an
// unbind or deprovision of a broker retired with answer: gone: 410 Gone
// without calling the broker, once the inventory has dropped the binding
// or the instance (with its bindings), so that the platform purges its
// record and the gateway's follows. The audit stage writes the one record
// of each such answer (outcome "retired"). A store that does not take the
// removal gets the platform a 503 to retry, never a 410 the inventory
// contradicts. nil when no broker is retired with answer: gone.
func WithRetiredGone(cfg *config.Config) core.Middleware {
	gone := false
	for i := range cfg.Brokers {
		gone = gone || cfg.Brokers[i].Retired.Gone()
	}
	if !gone {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			u := upstream.Of(s.Route)
			if !u.Cfg.Retired.Gone() || (s.Call.Endpoint != rules.Deprovision && s.Call.Endpoint != rules.Unbind) {
				next.ServeHTTP(w, r)
				return
			}
			if err := dropRetired(r.Context(), s); err != nil {
				guard.Of(s).Inv.Metrics.StoreError("inventory")
				guard.Of(s).Log.LogAttrs(r.Context(), slog.LevelError, "inventory unavailable", slog.String("broker", u.Name), slog.String("error", err.Error()))
				s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err, Description: "broker " + strconv.Quote(u.Name) +
					" is retired and gone, and the gateway's inventory is unavailable, so it cannot drop what the platform deletes; try again later"})
				return
			}
			s.Emulated = EmulatedRetired
			core.WriteAnswer(w, http.StatusGone, struct{}{})
		})
	}
}

// dropRetired removes from the inventory what the call deletes.
func dropRetired(ctx context.Context, s *core.Scope) error {
	iv := guard.Of(s).Inv
	if !iv.Keeps(upstream.Of(s.Route)) {
		return nil
	}
	return iv.Removed(ctx, upstream.Of(s.Route).Name, s.Call.InstanceID, s.Call.BindingID, store.LastOperation{})
}
