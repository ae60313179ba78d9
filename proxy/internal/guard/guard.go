package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/mutation"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// InProgress is Cloud Controller's description for a call refused while
// another operation on the instance is in progress: rules.InProgress.
const InProgress = rules.InProgress

// SyncHoldMargin is added to a broker's timeout to make the deadline of a
// synchronous call's lock: a gateway that dies mid-call leaves a lock that
// expires soon after the call would have.
const SyncHoldMargin = time.Minute

// ReleaseTimeout bounds the store calls that settle a lock after the
// request's own context may be gone.
const ReleaseTimeout = 5 * time.Second

// Guard holds the operation locks of one Gateway. Its store, its replica
// name and its queue of releases to retry outlive reloads.
type Guard struct {
	St       store.Store
	Now      func() time.Time
	Log      *slog.Logger
	Deadline time.Duration // default async deadline (state.operation_deadline)
	// watchAfter is the age past which a sweep polls an async operation
	// itself (state.reconcile.after; see watch); zero: never (the
	// reconciler is off). watchEvery is the least time between two of
	// this gateway's polls of one operation (state.reconcile.every less
	// half a sweep tick, so that a tick a little early still polls).
	WatchAfter, WatchEvery time.Duration
	watched                Watched          // when this gateway last polled each operation
	Metrics                *metrics.Metrics // nil: none
	Inv                    *Inventory       // records what succeeded; nil: nothing is recorded
	// replica names this process in orphan claims, so that of several
	// gateways sharing a store exactly one carries out each mitigation.
	Replica string
	// retry keeps releasing what the store refused to release.
	Retry *releaser
	// tookOver handles an expired lock a new call took the key over from
	// before the sweep released it (Gateway.tookOver); nil: nothing.
	TookOver func(context.Context, store.Lock)

	// What the gateway's own actions (sweeps, mitigation, reconcile,
	// quota checks) reach, set by New: the configuration, the brokers'
	// upstreams, the catalog cache, and where the actions are written.
	Cfg       *config.Config
	Upstreams map[string]*upstream.Upstream
	Catalogs  *catalog.Cache
	Own       OwnLog
}

// WithGuard is the guard stage. A mutating call takes the lock of what it
// changes for its duration (see acquire for what blocks what); a 202 turns
// the lock into an async operation (see answered), which a later
// last_operation releases. While a blocking lock is held, the call gets 400
// "Another operation for this service instance is in progress." (or 422
// ConcurrencyError with concurrency_error: spec at 2.14+) without reaching
// the broker. When the store cannot be reached, mutating calls fail closed
// with 503; reads never wait on a lock.
func WithGuard(g *Guard) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			s.Guarded = true
			kind, mutating := rules.LockKind(s.Call.Endpoint)
			if !mutating {
				if s.Call.Endpoint == rules.InstanceLastOperation || s.Call.Endpoint == rules.BindingLastOperation {
					g.notePoll(r.Context(), s)
				}
				next.ServeHTTP(w, r)
				return
			}
			up := upstream.Of(s.Route)
			now := g.Now()
			l := store.Lock{
				Key: up.LockKey(s.Call.InstanceID, s.Call.BindingID), Owner: core.NewRequestID(), Kind: kind,
				Tenant: s.Tenant, Broker: up.Name, InstanceID: s.Call.InstanceID, BindingID: s.Call.BindingID,
				ServiceID: s.Call.ServiceID, PlanID: s.Call.PlanID, TraceParent: s.TraceParent,
				Started: now, Deadline: now.Add(up.Timeout + SyncHoldMargin),
			}
			if s.Request != nil {
				l.ServiceID, l.PlanID = s.Request.ServiceID, s.Request.PlanID
			}
			// An owner stage that found no owner looks again under the
			// lock: its record comes with the lock, in one round trip.
			held, rec, err := g.acquire(r.Context(), up, l, s.OwnerUnseen)
			if mutation.LockFree && errors.Is(err, store.ErrHeld) {
				err = nil // broken on purpose (bench/campaign -mutation lock-free)
			}
			switch {
			case errors.Is(err, store.ErrHeld):
				if up.Cfg.AllowDeleteDuringCreate && kind == store.KindDeprovision && held.Kind == store.KindProvision && held.Async {
					next.ServeHTTP(w, r) // Cloud Controller cancelling a create
					return
				}
				s.Blocked = true
				s.Fail(w, g.busy(s))
				return
			case errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
				g.Metrics.StoreError("acquire")
				g.Log.LogAttrs(r.Context(), slog.LevelError, "operation state unavailable", slog.String("broker", up.Name),
					slog.String("error", err.Error()))
				s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
					Description: "the gateway's operation state is unavailable, so it cannot tell whether another operation on this instance is in progress; try again later"})
				return
			case s.WentAway(r, err): // nothing is sent
				return
			case err != nil:
				s.Fail(w, err) // a bug: a generic 500, the cause in the log
				return
			}
			if err := admitted(r.Context()); err != nil {
				// The quotas' counts may be stale (see quotaCall.admitted):
				// the provision goes no further, and its lock goes.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), ReleaseTimeout)
				g.Release(rctx, l)
				cancel()
				s.Fail(w, err)
				return
			}
			s.Lock = &core.HeldLock{Lock: l, Platform: r.Context(), Read: s.OwnerUnseen, Instance: rec}
			defer g.finish(w, s) // however the call ends: error, timeout, panic
			next.ServeHTTP(w, r)
		})
	}
}

// acquire takes l for a platform call or an orphan mitigation and then
// checks the locks that block it, as Cloud Controller's LockCheck does
// (lock_granularity binding):
//
//   - an instance operation in progress blocks every operation on the
//     instance and on its bindings (raise_if_instance_locked);
//   - a binding operation in progress blocks that binding
//     (raise_if_binding_locked) and the instance's update and deprovision
//     (its UpdaterLock checks every binding of the instance);
//   - bindings of one instance do not block each other.
//
// Each side takes its own lock before it looks at the other's, so of a
// binding call and an instance call that race, at least one sees the
// other: both may be refused, never both let through. When a blocking lock
// is found, l is released again and the blocker comes back with an error
// wrapping store.ErrHeld. Under lock_granularity instance every call locks
// the instance key, and Acquire alone decides.
//
// With reading set it takes the lock with store.Store.AcquireReading and
// returns the instance's record read with it (nil: none); a read that
// failed fails the acquire, whose lock then goes as an unconfirmed one's.
func (g *Guard) acquire(ctx context.Context, u *upstream.Upstream, l store.Lock, reading bool) (store.Lock, *store.Instance, error) {
	var held store.Lock
	var rec *store.Instance
	var err error
	if reading {
		held, rec, err = g.St.AcquireReading(ctx, l)
	} else {
		held, err = g.St.Acquire(ctx, l)
	}
	if err != nil {
		if !errors.Is(err, store.ErrHeld) {
			// No answer is not a no: a store that timed out (Redis paused)
			// may still take the lock when it wakes, and nobody would hold
			// it until its deadline. Its owner releases it once the store
			// answers (the campaign's "store paused while a call takes its
			// lock").
			g.Retry.Add(Pending{Lock: l, Unconfirmed: true, Cause: err})
		}
		return held, nil, err
	} else if held.Replaced != nil && g.TookOver != nil {
		g.TookOver(ctx, *held.Replaced)
	}
	if !u.BindingLocks {
		return store.Lock{}, rec, nil
	}
	blocker, found, err := g.blocker(ctx, u, l)
	if err == nil && !found {
		return store.Lock{}, rec, nil
	}
	g.Release(ctx, l)
	if err != nil {
		return store.Lock{}, nil, err
	}
	return blocker, nil, fmt.Errorf("%w: %s is locked by a %s in progress", store.ErrHeld, blocker.Key, blocker.Kind)
}

// blocker finds a lock held by another operation that blocks l (see
// acquire).
func (g *Guard) blocker(ctx context.Context, u *upstream.Upstream, l store.Lock) (store.Lock, bool, error) {
	switch rules.LockChecks(l.Kind) {
	case rules.CheckInstance:
		il, err := g.St.Get(ctx, store.LockKey(u.Name, l.InstanceID))
		if errors.Is(err, store.ErrNotFound) {
			return store.Lock{}, false, nil
		}
		return il, err == nil, err
	case rules.CheckBindings:
		ls, err := g.St.List(ctx, store.ListFilter{Broker: u.Name, InstanceID: l.InstanceID})
		if err != nil {
			return store.Lock{}, false, err
		}
		for _, x := range ls {
			if x.Key != l.Key && x.BindingID != "" {
				return x, true, nil
			}
		}
	}
	return store.Lock{}, false, nil
}

// busy is the answer to a call blocked by an operation in progress
// (rules.Busy: 422 ConcurrencyError for a broker with concurrency_error
// spec, else 400).
func (g *Guard) busy(s *core.Scope) *osb.Error {
	return rules.Busy(s.Version, upstream.Of(s.Route).Cfg.ConcurrencyError == "spec")
}

// sweep releases the locks whose deadline passed at now, logs each and
// returns them; the server runs it every state.sweep_interval.
func (g *Guard) sweep(ctx context.Context, now time.Time) []store.Lock {
	expired, err := g.St.ExpireDue(ctx, now)
	if err != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "sweeping expired operations failed", slog.String("error", err.Error()))
		return nil
	}
	for _, l := range expired {
		g.logExpired(ctx, "operation deadline passed; lock released", l)
	}
	return expired
}

// logExpired logs what, about the lock l that passed its deadline.
func (g *Guard) logExpired(ctx context.Context, what string, l store.Lock) {
	g.Log.LogAttrs(ctx, slog.LevelWarn, what,
		slog.String("broker", l.Broker), slog.String("tenant", l.Tenant), slog.String("instance_id", l.InstanceID),
		slog.String("binding_id", l.BindingID), slog.String("kind", l.Kind), slog.Bool("async", l.Async),
		slog.String("operation", l.Operation), slog.Time("started", l.Started), slog.Time("deadline", l.Deadline))
}

// SweepOperations records the orphan candidates of the provisions and
// binds whose locks passed their deadline unsettled (orphanExpired), then
// releases and logs expired locks once (candidates first: see
// expiredCreates), then, when the
// background reconciler is on, polls the broker for the async operations
// older than state.reconcile.after (not polled within
// state.reconcile.every) and settles those it says ended (watch), and
// purges the usage records past inventory.usage_retention (PurgeUsage);
// call it periodically (every state.SweepTick()). Replicas sharing a store
// may all call it.
func (g *Guard) SweepOperations(ctx context.Context) {
	now := g.Now()
	early := g.expiredCreates(ctx, now)
	g.orphanExpired(ctx, early, true)
	g.orphanExpired(ctx, notIn(g.sweep(ctx, now), early), false)
	g.watch(ctx)
	_, _ = g.PurgeUsage(ctx) // logged; the next sweep tries again
}

// Later returns the later of a and b.
func Later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Of is the guard of a call the guard stage marked Guarded; nil for
// other calls.
func Of(s *core.Scope) *Guard {
	if !s.Guarded {
		return nil
	}
	g, _ := s.Route.Guard.(*Guard)
	return g
}

// An Admission is what a call must pass once it holds its operation lock:
// a provision's quotas, which the quota stage counted before the guard
// (quota.With) and releases now that the provision counts as in flight.
// A non-nil answer is the refusal to send instead of going on; the guard
// releases its lock first.
type Admission interface {
	Admitted() error
}

type admissionKey struct{}

// WithAdmission is ctx carrying a, which the guard stage asks once the
// call holds its lock.
func WithAdmission(ctx context.Context, a Admission) context.Context {
	return context.WithValue(ctx, admissionKey{}, a)
}

// admitted asks the call's Admission, if any (WithAdmission); nil without.
func admitted(ctx context.Context) error {
	a, _ := ctx.Value(admissionKey{}).(Admission)
	if a == nil {
		return nil
	}
	return a.Admitted()
}
