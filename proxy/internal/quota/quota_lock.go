package quota

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
)

// Lease is the deadline of a quota's lock: it is held for a
// provision's count and admission only, a few store round trips (the
// inventory's count, the tenant's locks and orphans, the provision's own
// lock), never for its broker call, since the provision's own operation
// lock counts it from then on (quotaCall.flights). So a replica that dies
// holding it (kill -9) blocks its tenant's provisions for this long at
// most, where a lease over the broker call would block them for the
// broker's timeout and a minute more. A holder slower than the lease is
// caught before it goes on (quotaCall.admitted): the lease bounds the
// wait, never the exactness.
const Lease = 10 * time.Second

// quotaWait is the longest a provision waits for its quotas' locks while
// other provisions hold them: on this replica, or on another one. A live
// holder is done within milliseconds; one that is not is slow, or dead,
// and the platform is told so (429 with Retry-After) instead of waiting
// for the lease to end.
const quotaWait = 3 * time.Second

// quotaPauseMax is the longest pause between two tries for a quota's lock
// that another replica holds.
const quotaPauseMax = 20 * time.Millisecond

// lock takes q's lock for the provision: this replica's turn first, then
// the store's, which another replica may hold (tried again, with pauses up
// to quotaPauseMax, for quotaWait at most across the provision's quotas).
// Its errors: a 429 *osb.Error when another provision held it all along,
// the context's when the platform went away, else the store's.
func (qc *quotaCall) lock(ctx context.Context, r *http.Request, q *Rule) error {
	select {
	case q.local <- struct{}{}:
	default:
		select {
		case q.local <- struct{}{}:
		case <-qc.waiting():
			return quotaQueued(q)
		case <-ctx.Done():
			return qc.waitEnded(ctx, r, q, nil)
		}
	}
	l := q.Lock
	now := qc.g.Now()
	l.Owner, l.Started, l.Deadline = core.NewRequestID(), now, now.Add(Lease)
	pause := time.Millisecond
	for {
		holder, err := qc.g.St.Acquire(ctx, l)
		if err == nil {
			break
		}
		if !errors.Is(err, store.ErrHeld) {
			<-q.local
			// No answer is not a no: the store may still take it; the
			// retry queue releases it once the store answers.
			qc.g.Retry.Add(guard.Pending{Lock: l, Unconfirmed: true, Cause: err})
			return err
		}
		t := time.NewTimer(pause)
		select {
		case <-t.C:
		case <-qc.waiting():
			t.Stop()
			<-q.local
			return qc.quotaHeld(q, holder)
		case <-ctx.Done():
			t.Stop()
			<-q.local
			return qc.waitEnded(ctx, r, q, &holder)
		}
		pause = min(2*pause, quotaPauseMax)
	}
	qc.held = append(qc.held, heldQuota{q: q, lock: l})
	return nil
}

// waiting is the channel that fires once the provision has waited
// quotaWait, started at its first call.
func (qc *quotaCall) waiting() <-chan time.Time {
	if qc.waitEnds == nil {
		qc.waitEnds, qc.stopWait = qc.timer(quotaWait)
	}
	return qc.waitEnds
}

// stopWaiting stops the wait's timer, if it started.
func (qc *quotaCall) stopWaiting() {
	if qc.stopWait != nil {
		qc.stopWait()
	}
}

// waitEnded is what a wait for q's lock that ctx ended comes to: the
// platform went away (ctx's error), or the call's time ran out while
// another provision held the lock (the 429 of that).
func (qc *quotaCall) waitEnded(ctx context.Context, r *http.Request, q *Rule, holder *store.Lock) error {
	if r.Context().Err() != nil {
		return ctx.Err()
	}
	if holder == nil {
		return quotaQueued(q)
	}
	return qc.quotaHeld(q, *holder)
}

// quotaHeld is the answer to a provision that waited in vain for q's lock,
// held by holder on another replica (or by this one's request that has
// not let it go): 429, to be tried again when the holder's lease ends at
// the latest. A 429 is no 5xx: Cloud Controller starts no orphan
// mitigation for it, and nothing reached the broker.
func (qc *quotaCall) quotaHeld(q *Rule, holder store.Lock) error {
	secs := core.RetryAfterSecs(holder.Deadline.Sub(qc.g.Now()))
	return &osb.Error{Status: http.StatusTooManyRequests, Header: core.RetryHeader(secs), Description: fmt.Sprintf(
		"quota %q of tenant %q is being checked by another gateway replica: its lock is held by another replica (for %ds more at most, should that replica have died); the provision was neither counted nor forwarded: try again after Retry-After",
		q.Label, q.Tenant, secs)}
}

// quotaQueued is the answer to a provision that waited in vain for its
// turn on this replica, behind other provisions of q: 429 too.
func quotaQueued(q *Rule) error {
	return &osb.Error{Status: http.StatusTooManyRequests, Header: core.RetryHeader(1), Description: fmt.Sprintf(
		"quota %q of tenant %q is being checked for other provisions queued on this gateway replica (its lock is held by another replica or the state store is slow); the provision was neither counted nor forwarded: try again after Retry-After",
		q.Label, q.Tenant)}
}

// Admitted releases the provision's quotas' locks once the guard holds its
// operation lock. Each release must find the lock still this provision's:
// then no other provision counted between this one's count and its
// operation lock, and every later count sees that lock. A lock found
// lapsed (the count outlived quotaLease) or taken over may have let
// another replica count without this provision: it is refused with 429,
// to be tried again. A store that does not answer leaves that unknown:
// 503, and the release is retried.
func (qc *quotaCall) Admitted() error {
	ctx, cancel := context.WithTimeout(context.Background(), guard.ReleaseTimeout)
	defer cancel()
	var lapsed *Rule
	var failed error
	for i := len(qc.held) - 1; i >= 0; i-- {
		h := qc.held[i]
		err := qc.g.St.Release(ctx, h.lock.Key, h.lock.Owner)
		<-h.q.local
		switch {
		case err == nil:
		case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner):
			lapsed = h.q
		default:
			qc.g.Retry.Add(guard.Pending{Lock: h.lock, Cause: err})
			failed = err
		}
	}
	qc.held = nil
	switch {
	case failed != nil:
		qc.g.Metrics.StoreError("quota")
		qc.g.Log.LogAttrs(ctx, slog.LevelError, "quota's lock not released", slog.String("tenant", qc.s.Tenant),
			slog.String("error", failed.Error()))
		return &osb.Error{Status: http.StatusServiceUnavailable, Err: failed, Description: "the gateway cannot tell whether tenant " +
			strconv.Quote(qc.s.Tenant) + "'s quotas admit the provision (its state store is unavailable), so it does not forward it; try again later"}
	case lapsed != nil:
		return &osb.Error{Status: http.StatusTooManyRequests, Header: core.RetryHeader(1), Description: fmt.Sprintf(
			"quota %q of tenant %q was counted for this provision, but its lock lapsed before the provision was admitted (the count took longer than %s), so another replica may have counted meanwhile; the provision was not forwarded: try again after Retry-After",
			lapsed.Label, lapsed.Tenant, Lease)}
	}
	return nil
}

// release gives back every quota lock held, last first.
func (qc *quotaCall) release() {
	if len(qc.held) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard.ReleaseTimeout)
	defer cancel()
	for i := len(qc.held) - 1; i >= 0; i-- {
		h := qc.held[i]
		qc.g.Release(ctx, h.lock)
		<-h.q.local
	}
	qc.held = nil
}
