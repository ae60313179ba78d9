package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

// InProgress is Cloud Controller's description for a call refused while
// another operation on the instance is in progress (OSB 2.10 "Blocking
// Operations").
const InProgress = "Another operation for this service instance is in progress."

// syncHoldMargin is added to a broker's timeout to make the deadline of a
// synchronous call's lock: a gateway that dies mid-call leaves a lock that
// expires soon after the call would have.
const syncHoldMargin = time.Minute

// releaseTimeout bounds the store calls that settle a lock after the
// request's own context may be gone.
const releaseTimeout = 5 * time.Second

// guard holds the operation locks of one Gateway. Its store outlives
// reloads.
type guard struct {
	st       store.Store
	now      func() time.Time
	log      *slog.Logger
	deadline time.Duration // default async deadline (state.operation_deadline)
	metrics  *Metrics      // nil: none
}

// heldLock is the lock a mutating call holds while it runs.
type heldLock struct {
	lock    store.Lock
	settled bool // converted to async or released by the response
}

var kinds = map[rules.Endpoint]string{
	rules.Provision: store.KindProvision, rules.Update: store.KindUpdate, rules.Deprovision: store.KindDeprovision,
	rules.Bind: store.KindBind, rules.Unbind: store.KindUnbind,
}

// withGuard is the guard stage. A mutating call on an instance takes the
// instance's lock for its duration; a 202 turns the lock into an async
// operation (see settle), which a later last_operation releases. While the
// lock is held, another mutating call on the instance or its bindings gets
// 400 "Another operation for this service instance is in progress." (or
// 422 ConcurrencyError with concurrency_error: spec at 2.14+) without
// reaching the broker. When the store cannot be reached, mutating calls
// fail closed with 503; reads never touch the lock.
func withGuard(g *guard) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			s.guard = g
			kind, mutating := kinds[s.Call.Endpoint]
			if !mutating {
				if s.Call.Endpoint == rules.InstanceLastOperation || s.Call.Endpoint == rules.BindingLastOperation {
					g.notePoll(r.Context(), s)
				}
				next.ServeHTTP(w, r)
				return
			}
			up := s.route.up
			now := g.now()
			l := store.Lock{
				Key: store.LockKey(up.name, s.Call.InstanceID), Owner: newRequestID(), Kind: kind,
				Tenant: s.Tenant, Broker: up.name, InstanceID: s.Call.InstanceID, BindingID: s.Call.BindingID,
				ServiceID: s.Call.ServiceID, PlanID: s.Call.PlanID, TraceParent: s.TraceParent,
				Started: now, Deadline: now.Add(up.timeout + syncHoldMargin),
			}
			if s.Request != nil {
				l.ServiceID, l.PlanID = s.Request.ServiceID, s.Request.PlanID
			}
			held, err := g.st.Acquire(r.Context(), l)
			switch {
			case errors.Is(err, store.ErrHeld):
				if up.cfg.AllowDeleteDuringCreate && kind == store.KindDeprovision && held.Kind == store.KindProvision && held.Async {
					next.ServeHTTP(w, r) // Cloud Controller cancelling a create
					return
				}
				s.Blocked = true
				s.fail(w, g.busy(s))
				return
			case errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded):
				g.metrics.StoreError("acquire")
				g.log.LogAttrs(r.Context(), slog.LevelError, "operation state unavailable", slog.String("broker", up.name),
					slog.String("error", err.Error()))
				s.fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
					Description: "the gateway's operation state is unavailable, so it cannot tell whether another operation on this instance is in progress; try again later"})
				return
			case err != nil:
				s.fail(w, err) // a bug or a gone platform: a generic 500, the cause in the log
				return
			}
			s.lock = &heldLock{lock: l}
			defer g.finish(s) // however the call ends: error, timeout, client gone, panic
			next.ServeHTTP(w, r)
		})
	}
}

// busy is the answer to a call blocked by an operation in progress.
func (g *guard) busy(s *Scope) *osb.Error {
	if s.route.up.cfg.ConcurrencyError == "spec" && s.Version.AtLeast(osb.Version{Major: 2, Minor: 14}) {
		return &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeConcurrencyError, Description: InProgress}
	}
	return &osb.Error{Status: http.StatusBadRequest, Description: InProgress}
}

// settle decides the fate of the call's lock from the broker's answer,
// before the answer reaches the platform (so the platform's next call sees
// the new state): a 202 keeps it as an async operation until the plan's
// maximum_polling_duration (or state.operation_deadline); anything else
// releases it.
func (g *guard) settle(res *http.Response, s *Scope) {
	h := s.lock
	if h == nil || h.settled {
		return
	}
	h.settled = true
	ctx, cancel := context.WithTimeout(context.WithoutCancel(res.Request.Context()), releaseTimeout)
	defer cancel()
	if res.StatusCode != http.StatusAccepted {
		g.release(ctx, h.lock)
		return
	}
	l := h.lock
	now := g.now()
	l.Async, l.Operation, l.Deadline = true, s.Operation, now.Add(g.deadline)
	if s.catalog != nil && l.PlanID != "" {
		if d, ok := s.catalog.index.MaximumPollingDuration(l.PlanID); ok {
			l.Deadline = now.Add(d)
		}
	}
	if err := g.st.Update(ctx, l); err != nil {
		g.metrics.StoreError("update")
		g.log.LogAttrs(ctx, slog.LevelError, "async operation not recorded; the instance is not blocked",
			slog.String("broker", l.Broker), slog.String("instance_id", l.InstanceID), slog.String("error", err.Error()))
	}
}

// finish releases the lock of a call that ended without an answer from
// the broker (error, timeout, platform gone, panic).
func (g *guard) finish(s *Scope) {
	if h := s.lock; h != nil && !h.settled {
		h.settled = true
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		g.release(ctx, h.lock)
	}
}

func (g *guard) release(ctx context.Context, l store.Lock) {
	if err := g.st.Release(ctx, l.Key, l.Owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		g.metrics.StoreError("release")
		g.log.LogAttrs(ctx, slog.LevelWarn, "lock not released; it expires at its deadline",
			slog.String("broker", l.Broker), slog.String("instance_id", l.InstanceID),
			slog.Time("deadline", l.Deadline), slog.String("error", err.Error()))
	}
}

// notePoll looks up the async operation a last_operation polls, so the
// poll's span can link to the span that started it. A store failure does
// not block a poll.
func (g *guard) notePoll(ctx context.Context, s *Scope) {
	l, err := g.st.Get(ctx, store.LockKey(s.route.up.name, s.Call.InstanceID))
	if err != nil || !l.Async || !g.polls(s.Call, l) {
		return
	}
	polled := l // copied only for a tracked operation: l itself stays on the stack
	s.polled = &polled
	s.StartedBy = l.TraceParent
	if s.Operation == "" {
		s.Operation = l.Operation
	}
}

// polls reports whether a last_operation call is about the operation l.
func (g *guard) polls(c rules.Call, l store.Lock) bool {
	if c.Endpoint == rules.BindingLastOperation {
		return l.BindingID == c.BindingID
	}
	return l.BindingID == ""
}

// settlePoll releases the polled operation's lock when the broker says it
// is over: state succeeded or failed, or 410 Gone for a delete.
func (g *guard) settlePoll(res *http.Response, body []byte, s *Scope) {
	l := s.polled
	if l == nil {
		return
	}
	over := false
	switch res.StatusCode {
	case http.StatusOK:
		var lo struct {
			State string `json:"state"`
		}
		if json.Unmarshal(body, &lo) == nil && (lo.State == "succeeded" || lo.State == "failed") {
			over = true
		}
	case http.StatusGone:
		over = l.Kind == store.KindDeprovision || l.Kind == store.KindUnbind
	}
	if !over {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(res.Request.Context()), releaseTimeout)
	defer cancel()
	g.release(ctx, *l)
}

// sweep releases the locks whose deadline passed and logs each; the
// server runs it every state.sweep_interval.
func (g *guard) sweep(ctx context.Context) {
	expired, err := g.st.ExpireDue(ctx, g.now())
	if err != nil {
		g.log.LogAttrs(ctx, slog.LevelWarn, "sweeping expired operations failed", slog.String("error", err.Error()))
		return
	}
	for _, l := range expired {
		g.log.LogAttrs(ctx, slog.LevelWarn, "operation deadline passed; lock released",
			slog.String("broker", l.Broker), slog.String("tenant", l.Tenant), slog.String("instance_id", l.InstanceID),
			slog.String("kind", l.Kind), slog.Bool("async", l.Async), slog.String("operation", l.Operation),
			slog.Time("started", l.Started), slog.Time("deadline", l.Deadline))
	}
}

// SweepOperations releases and logs expired locks once; call it
// periodically (every state.sweep_interval).
func (g *Gateway) SweepOperations(ctx context.Context) { g.guard.sweep(ctx) }
