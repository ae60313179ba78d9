package guard

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/mutation"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Answered settles, before the broker's answer reaches the platform (so
// the platform's next call sees the new state), everything the answer
// decides:
//
//   - the call's own lock: a 202 the platform gets keeps it as an async
//     operation until the plan's maximum_polling_duration (or
//     state.operation_deadline); anything else releases it;
//   - orphans: a success the platform gets cancels a pending mitigation of
//     the same instance or binding (before the lock is released, so a
//     mitigation waiting for the lock finds nothing to undo; a
//     provision's in the store call that writes its inventory record,
//     store.Store.PutInstanceCancelling); a failure
//     records a candidate per the orphan-mitigation table, as does a
//     success the platform does not get (cut short, refused, or the
//     platform gone: a reset, never a half-close). A provision's or
//     bind's success the platform may still get keeps its lock until its
//     answer is written: see guard_delivery.go;
//   - a polled operation the answer reports ended, in every validation
//     mode, even when the answer is refused for another field.
func (g *Guard) Answered(res *http.Response, s *core.Scope, a upstream.Answer) {
	if (s.Lock == nil || s.Lock.Settled) && s.Polled == nil && !s.PollUnseen {
		return // a read with no operation to settle: the hot path
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(res.Request.Context()), ReleaseTimeout)
	defer cancel()
	if h := s.Lock; h != nil && !h.Settled {
		h.Settled = true
		g.settleCall(ctx, res.StatusCode, s, a)
		g.holdLastByte(res, s, a.Body) // a success whose delivery decides its orphan
	}
	if s.Polled != nil || s.PollUnseen {
		g.SettlePoll(ctx, a.Answer, s)
	}
}

// settleCall settles the call's own lock and the orphan its answer leaves
// or cancels (see answered).
func (g *Guard) settleCall(ctx context.Context, status int, s *core.Scope, a upstream.Answer) {
	h := s.Lock
	// shimmed: the platform got the async shim's 202, and gets this answer
	// from its polls; the shim records it in the lock when the call ends.
	shimmed := s.Shim.Shimmed()
	gone := !shimmed && h.Platform != nil && h.Platform.Err() != nil
	seen := !a.Cut && !a.Refused && !gone
	// A 202 that is not a JSON object is no operation the platform can
	// poll (Cloud Controller fails the call): not an async operation, not
	// a deletion in progress; whether the broker started anything is
	// unknown, so the lock is held as after a timeout (the campaign's
	// "202 that is not JSON to a deprovision").
	malformed := seen && status == http.StatusAccepted && !a.Object && !shimmed
	accepted := seen && status == http.StatusAccepted && !malformed
	// A 202 the broker sent to a platform gone before it came started an
	// operation all the same: its lock is that async operation, which the
	// reconciler settles (nobody else polls it), so no retry of the
	// platform's overlaps it (the 30-minute campaign's "the platform
	// hangs up before an async deprovision's 202").
	unheard := gone && !a.Cut && !a.Refused && status == http.StatusAccepted && a.Object
	orphan, why, reportOnly := orphanOf(s.Call, status, a, gone)
	// cancel is the pending orphan a success the platform sees cancels,
	// before the lock is released; a provision's record takes it to the
	// store in the same call (nil: none to cancel).
	var cancel *orphanCancel
	if !orphan && seen && rules.OrphanSettled(s.Call, status) {
		cancel = &orphanCancel{id: orphanIDOf(upstream.Of(s.Route), s.Call)}
	}
	// record is the inventory record the store did not take, retried
	// until it does, before the lock goes: what the broker made stays
	// named (nil: recorded, or nothing to record).
	var record func(context.Context) error
	if seen && !malformed {
		// Under the lock, before it is released. A shimmed call's record
		// goes to the retry queue with its outcome (concludeShim), before
		// it: no poll reports a success the inventory does not name.
		if mutation.AckBeforeStore { // broken on purpose (bench/campaign -mutation ack-before-store)
			late, body := *s, bytes.Clone(a.Body)
			mutation.Later(func() { _ = g.Inv.called(context.Background(), &late, status, a.Answer, body, nil) })
		} else if err := g.Inv.called(ctx, s, status, a.Answer, a.Body, cancel); err != nil {
			body := bytes.Clone(a.Body) // a.body goes back to its pool with the answer
			record = func(ctx context.Context) error { return g.Inv.called(ctx, s, status, a.Answer, body, nil) }
			if shimmed {
				s.Shim.Record, record = record, nil
			}
		}
	}
	if orphan {
		due := g.Now()
		if reportOnly {
			due = NeverDue
		}
		if o, ok := g.NoteOrphan(ctx, s, why, due, "", time.Time{}); !ok {
			// Not recorded: the retry queue records it, then releases
			// the lock, so no retry can succeed and be undone meanwhile.
			g.Retry.Add(Pending{Lock: h.Lock, PutOrphan: &o, Keep: shimmed, Record: record})
			return
		}
	} else if cancel != nil && cancel.done {
		if cancel.cancelled {
			g.cancelled(ctx, s, cancel.id)
		}
	} else if cancel != nil && !g.cancelOrphan(ctx, s, cancel.id) {
		// The store did not take the cancellation: keep the lock until
		// it does, so no mitigation can undo what just succeeded; the
		// retry queue cancels, then releases.
		p := Pending{Lock: h.Lock, cancelOrphan: cancel.id, Keep: accepted || shimmed, Record: record}
		if accepted {
			// The 202's lock is the async operation, written after the
			// cancellation (the 30-minute campaign's "store paused as
			// an async unbind is accepted").
			p.Lock, p.async = g.asyncLock(s), true
		}
		g.Retry.Add(p)
		return
	}
	if shimmed {
		return
	}
	if accepted || unheard {
		g.KeepAsync(ctx, s) // a 202: its lock is the async operation
	}
	switch {
	case malformed:
		// First: a malformed 202 is no operation, and its lock no async
		// one, whatever its delivery (which would keep a 202's lock).
		g.hold(ctx, s)
	case seen && unseen(s.Call, status):
		// Whether the platform got it decides the orphan: the lock is
		// held until the answer's write tells (delivered), so no retry
		// of the platform's can succeed and then be undone.
		h.Delivering, h.Status, h.Record = true, status, record
	case record != nil:
		// Keep the lock until the record is in: no retry of the
		// platform's may find the instance unnamed meanwhile.
		g.Retry.Add(Pending{Lock: h.Lock, Record: record, Keep: accepted})
	case !accepted && !unheard:
		g.Release(ctx, h.Lock)
	}
}

// unseen reports whether a call's answer with status leaves an orphan when
// the platform does not get it (rules.OrphanUnseen).
func unseen(c rules.Call, status int) bool {
	ok, _ := rules.OrphanUnseen(c, status, "")
	return ok
}

// orphanOf reports whether a call's answer leaves an orphan candidate, and
// why: by the orphan-mitigation table (a body cut short counts as
// malformed), or a success the platform does not get (refused by the
// rules, or the platform gone). reportOnly marks a candidate the gateway
// records but never undoes by itself: a 200 cut short, which the platform
// gets as a 502 (so it does not hold what the broker says it has) while
// the 200 says the broker held it already, perhaps for a platform, so that
// nothing at the broker is left that the gateway does not name.
func orphanOf(c rules.Call, status int, a upstream.Answer, gone bool) (orphan bool, why string, reportOnly bool) {
	switch {
	case a.Cut:
		if ok, why := rules.OrphanCandidate(c, a.Answer); ok {
			return true, why + " (cut short)", false
		}
		if ok, why := rules.OrphanUnseen(c, status, "its body was cut short, so the platform got a 502; a 200 says the broker held it already, so the gateway reports it and does not undo it"); ok {
			return true, why, true
		}
	case a.Refused:
		if ok, why := rules.OrphanUnseen(c, status, "the answer broke the OSB rules, so the platform got a 502"); ok {
			return true, why, false
		}
	case gone:
		if ok, why := rules.OrphanUnseen(c, status, whyGone); ok {
			return true, why, false
		}
	}
	orphan, why = rules.OrphanCandidate(c, a.Answer)
	return orphan, why, false
}

// KeepAsync turns the call's lock into an async operation and returns it.
// When the store does not take it, the retry queue writes it once the
// store is back: the call's lock, with the deadline of a synchronous call,
// would otherwise block the instance past the operation's end, which a
// poll only sees in an async lock.
func (g *Guard) KeepAsync(ctx context.Context, s *core.Scope) store.Lock {
	l := g.asyncLock(s)
	if err := g.St.Update(ctx, l); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrNotOwner) && !errors.Is(err, store.ErrInvalid) {
		g.Metrics.StoreError("update")
		g.Retry.Add(Pending{Lock: l, async: true, Cause: err})
	}
	return l
}

// asyncLock is the call's lock as the async operation its 202 started.
func (g *Guard) asyncLock(s *core.Scope) store.Lock {
	l := s.Lock.Lock
	l.Async, l.Operation, l.Deadline = true, s.Operation, g.AsyncDeadline(s, g.Now())
	return l
}

// AsyncDeadline is the deadline of an async operation of s's call that
// starts at now: the plan's maximum_polling_duration, else
// state.operation_deadline.
func (g *Guard) AsyncDeadline(s *core.Scope, now time.Time) time.Time {
	if s.Catalog != nil && s.Lock != nil && s.Lock.Lock.PlanID != "" {
		if d, ok := s.Catalog.Index().MaximumPollingDuration(s.Lock.Lock.PlanID); ok {
			return now.Add(d)
		}
	}
	return now.Add(g.Deadline)
}

// holdAfterTimeout keeps the call's lock for the broker's
// hold_after_timeout once the gateway gave up on the broker's answer: the
// broker may still be working on the call, and a retry must not overlap
// it. It returns the lock's owner, under which an orphan mitigation takes
// the lock over.
func (g *Guard) holdAfterTimeout(s *core.Scope) string {
	h := s.Lock
	if h == nil || h.Settled {
		return ""
	}
	h.Settled = true
	if s.Shim.Shimmed() {
		s.Shim.TimedOut = true // the shim holds the lock when the call ends
		return h.Lock.Owner
	}
	ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
	defer cancel()
	return g.hold(ctx, s)
}

// hold keeps the call's lock for the broker's hold_after_timeout from now
// and returns its owner.
func (g *Guard) hold(ctx context.Context, s *core.Scope) string {
	h := s.Lock
	l := h.Lock
	l.Deadline = g.Now().Add(upstream.Of(s.Route).Cfg.HoldAfterTimeout)
	if err := g.St.Update(ctx, l); err != nil {
		g.Metrics.StoreError("update")
		g.Log.LogAttrs(ctx, slog.LevelWarn, "lock not extended after a call whose outcome is unknown; it expires at the deadline it was taken with",
			slog.String("broker", l.Broker), slog.String("instance_id", l.InstanceID), slog.Time("deadline", h.Lock.Deadline),
			slog.String("error", err.Error()))
	}
	return l.Owner
}

// finish settles a success whose receipt decides its orphan once its
// answer was written (delivered), and releases the lock of a call that
// ended without an answer from the broker (unreachable, refused
// connection, panic).
func (g *Guard) finish(w http.ResponseWriter, s *core.Scope) {
	h := s.Lock
	if h != nil && h.Delivering {
		g.delivered(w, s)
		return
	}
	if h != nil && !h.Settled {
		h.Settled = true
		ctx, cancel := context.WithTimeout(context.Background(), ReleaseTimeout)
		defer cancel()
		g.Release(ctx, h.Lock)
	}
}

// Release releases l; when the store fails, the retry queue keeps trying
// until it takes it.
func (g *Guard) Release(ctx context.Context, l store.Lock) {
	err := g.St.Release(ctx, l.Key, l.Owner)
	if err == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner) {
		return
	}
	g.Retry.Add(Pending{Lock: l, Cause: err})
}

// notePoll looks up the async operation a last_operation polls, so the
// poll's span can link to the span that started it and its answer can
// settle it. A store failure does not block a poll: a poll answer that
// ends the operation is then settled by the retry queue.
func (g *Guard) notePoll(ctx context.Context, s *core.Scope) {
	key := g.pollKey(s)
	l, err := g.St.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.PollUnseen = true
		}
		return
	}
	if !l.Async || !polls(s.Call, l) {
		return
	}
	polled := l // copied only for a tracked operation: l itself stays on the stack
	s.Polled = &polled
	s.StartedBy = l.TraceParent
	if s.Operation == "" {
		s.Operation = l.Operation
	}
}

// pollKey is the lock key of the operation a last_operation call polls.
func (g *Guard) pollKey(s *core.Scope) string {
	if s.Call.Endpoint == rules.BindingLastOperation {
		return upstream.Of(s.Route).LockKey(s.Call.InstanceID, s.Call.BindingID)
	}
	return store.LockKey(upstream.Of(s.Route).Name, s.Call.InstanceID)
}

// polls reports whether a last_operation call is about the operation l.
func polls(c rules.Call, l store.Lock) bool {
	if c.Endpoint == rules.BindingLastOperation {
		return l.BindingID == c.BindingID
	}
	return l.BindingID == ""
}

// SettlePoll releases the polled operation's lock when the broker's answer
// a ends it (rules.Answer.Ends). When the poll could not see the lock (the
// store was down), an answer that may end it goes to the retry queue, which
// settles it once the store answers.
func (g *Guard) SettlePoll(ctx context.Context, a rules.Answer, s *core.Scope) {
	if s.Polled != nil {
		if a.Ends(upstream.PolledEndpoint(s)) {
			l := *s.Polled
			if err := g.Inv.Polled(ctx, s, l, a); err != nil { // under the lock, before it is released
				// The store did not take the record: the retry queue
				// writes it, then releases the lock, so what the
				// platform was told is never lost to a released lock
				// (the campaign's "store writes fail while reads work").
				g.Retry.Add(Pending{Lock: l, Cause: err, Record: func(ctx context.Context) error { return g.Inv.Polled(ctx, s, l, a) }})
				return
			}
			g.Release(ctx, l)
		}
		return
	}
	if a.Ends(rules.Deprovision) { // the kind is unknown until the store answers
		g.Retry.Add(Pending{poll: &pollSeen{key: g.pollKey(s), call: s.Call, answer: a, seen: g.Now()}})
	}
}
