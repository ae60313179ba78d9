package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// The orphan mitigation: the background worker that undoes what a broker
// may have made for a call that failed (a DELETE of the instance or
// binding), rescheduling what it could not undo.

// MitigateOrphans carries out every due orphan once (see mitigate). Call
// it every OrphanTick; replicas sharing a store may all call it.
func (g *Guard) MitigateOrphans(ctx context.Context) {
	due, err := g.St.DueOrphans(ctx, g.Now(), 20)
	if err != nil {
		return // the store is down; the next tick tries again
	}
	for _, o := range due {
		g.Mitigate(ctx, o)
	}
}

// Mitigate carries out one orphan's undo, once across replicas, never
// against an instance a platform call is using or has just made its own:
//
//  1. it claims the orphan in the store for the broker's timeout (a
//     replica that loses the claim skips it);
//  2. it takes the instance's (or binding's) lock as a platform call
//     would, under the owner of the lock held after a timeout when there is
//     one; while another operation holds it, the orphan waits until its
//     claim lapses (not counted as an attempt);
//  3. it reads the orphan again: a provision or bind that succeeded
//     cancels it while holding the lock, so a mitigation that got the lock
//     after it finds nothing to undo;
//  4. it sends the deprovision or unbind, then deletes the orphan (200,
//     410, or a later attempt's poll of a 202 that says it succeeded) or
//     reschedules it on orphan_schedule, and only then
//     releases the lock (so no success can be cancelled in between).
func (g *Guard) Mitigate(ctx context.Context, o store.Orphan) string {
	result := g.mitigateOnce(ctx, o)
	g.Metrics.Mitigation(o.Broker, result)
	return result
}

// mitigateOnce is mitigate without the counting.
func (g *Guard) mitigateOnce(ctx context.Context, o store.Orphan) string {
	gd := g
	u := g.Upstreams[o.Broker]
	if u == nil {
		o.NextAttempt, o.LastError = NeverDue, "the broker is no longer configured"
		g.putOrphan(ctx, o)
		return MitigationFail
	}
	now := gd.Now()
	o, err := gd.St.ClaimOrphan(ctx, o.ID, gd.Replica, now.Add(u.Timeout+SyncHoldMargin))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return mitigationGone
	case errors.Is(err, store.ErrHeld):
		return mitigationTaken
	case err != nil:
		return mitigationDown
	}
	if now.Before(o.HoldUntil) {
		// Made due early (POST /admin/orphans/{id}/retry) while the call
		// that may have left it may still run: its DELETE could race the
		// call, and a 410 then proves nothing. It goes when the hold ends.
		o.NextAttempt = o.HoldUntil
		g.putOrphan(ctx, o)
		return mitigationBusy
	}
	owner := o.LockOwner
	if owner == "" {
		owner = core.NewRequestID()
	}
	l := store.Lock{Key: u.LockKey(o.InstanceID, o.BindingID), Owner: owner, Kind: o.Kind, Tenant: o.Tenant, Broker: o.Broker,
		InstanceID: o.InstanceID, BindingID: o.BindingID, ServiceID: o.ServiceID, PlanID: o.PlanID,
		Started: now, Deadline: now.Add(u.Timeout + SyncHoldMargin)}
	if _, _, err := gd.acquire(ctx, u, l, false); err != nil {
		// Nothing is written: a call holding the lock may cancel the
		// orphan, and a write here could bring it back. The claim lapses
		// and the orphan is due again then.
		if errors.Is(err, store.ErrHeld) {
			return mitigationBusy
		}
		return mitigationDown
	}
	keep := false
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
		defer cancel()
		if !keep {
			gd.Release(rctx, l)
			return
		}
		// The broker deletes it asynchronously: the lock stays as that
		// async operation (no platform call may overlap the deletion),
		// under the owner the orphan's next attempt takes it over with;
		// a poll that sees the deletion end releases it (the next attempt,
		// or the watch).
		l.Async, l.Operation, l.Deadline = true, o.UndoOperation, gd.Now().Add(gd.Deadline)
		if err := gd.St.Update(rctx, l); err != nil {
			gd.Release(rctx, l)
		}
	}()
	if _, err := gd.St.GetOrphan(ctx, o.ID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return mitigationGone
		}
		return mitigationDown
	}
	o.LockOwner = owner
	var result string
	if o.Undoing {
		result = g.followUndo(ctx, u, &o)
	} else {
		result = g.undoOrphan(ctx, u, &o)
	}
	keep = result == mitigationAsync && o.Undoing
	return result
}

// followUndo polls the asynchronous deletion the undo of o started (see
// store.Orphan.Undoing): the orphan goes once the broker says it
// succeeded (or 410), another DELETE goes once it says it failed, and
// while it is in progress (or the poll fails) the orphan is rescheduled.
// An undo's 202 is not the end: a deletion can fail, and what it was to
// delete would then be named by nothing (the campaign's "the undo's
// asynchronous deletion fails").
func (g *Guard) followUndo(ctx context.Context, u *upstream.Upstream, o *store.Orphan) string {
	a, err := pollOperation(u, ctx, store.Lock{Kind: o.Kind, InstanceID: o.InstanceID, BindingID: o.BindingID,
		ServiceID: o.ServiceID, PlanID: o.PlanID, Operation: o.UndoOperation})
	switch {
	case err == nil && (a.State == rules.PollSucceeded || a.State == rules.PollGone):
		o.Undoing = false
		return g.orphanGone(ctx, *o, a.Status)
	case err == nil && a.State == rules.PollFailed:
		o.Undoing, o.UndoOperation = false, ""
		return g.undoOrphan(ctx, u, o)
	case err == nil:
		err = fmt.Errorf("the broker's deletion is still in progress (last_operation answered %d %s)", a.Status, a.State)
	}
	g.reschedule(ctx, u, *o, err)
	return mitigationAsync
}

// orphanGone removes o, whose undo the broker confirmed with status.
func (g *Guard) orphanGone(ctx context.Context, o store.Orphan, status int) string {
	log := g.Log
	if err := g.St.DeleteOrphan(ctx, o.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		log.LogAttrs(ctx, slog.LevelWarn, "orphan mitigated but not removed from the queue; the next try finds it gone (410)",
			slog.String("id", o.ID), slog.String("error", err.Error()))
	}
	log.LogAttrs(ctx, slog.LevelInfo, "orphan mitigated", slog.String("id", o.ID), slog.String("broker", o.Broker),
		slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID), slog.Int("status", status))
	if iv := g.Inv; iv != nil { // a record the reconciler wrote names it no more (the campaign's (h))
		iv.failed(ctx, o.Broker, rules.Call{Endpoint: rules.LockedBy(o.Kind), InstanceID: o.InstanceID, BindingID: o.BindingID},
			iv.Removed(ctx, o.Broker, o.InstanceID, o.BindingID, store.LastOperation{}))
	}
	return mitigated
}

// undoOrphan sends o's deprovision or unbind and records the outcome.
func (g *Guard) undoOrphan(ctx context.Context, u *upstream.Upstream, o *store.Orphan) string {
	status, operation, err := Undo(u, ctx, *o)
	switch {
	case err == nil && (status == http.StatusOK || status == http.StatusGone):
		o.Undoing = false
		return g.orphanGone(ctx, *o, status)
	case err == nil && status == http.StatusAccepted:
		// The broker deletes it asynchronously: followed to its end by
		// the next attempts.
		o.Undoing, o.UndoOperation = true, operation
		g.reschedule(ctx, u, *o, errors.New("the broker accepted the deletion (202); the next attempt polls it"))
		return mitigationAsync
	case err == nil:
		err = fmt.Errorf("the broker answered %d", status)
	}
	o.Undoing = false
	g.reschedule(ctx, u, *o, err)
	return MitigationFail
}

// reschedule puts o back for its next attempt on the broker's
// orphan_schedule, or gives up on it (it stays, never due, for the
// operator) once the schedule is spent.
func (g *Guard) reschedule(ctx context.Context, u *upstream.Upstream, o store.Orphan, err error) {
	log := g.Log
	schedule, _ := config.ParseSchedule(u.Cfg.OrphanSchedule)
	o.Attempts++
	o.LastError = err.Error()
	if !o.Undoing {
		o.LockOwner = "" // an async deletion's keeps the lock it holds (mitigateOnce)
	}
	if o.Attempts > len(schedule) {
		o.NextAttempt = NeverDue
		log.LogAttrs(ctx, slog.LevelError, "orphan mitigation gave up; the operator must clean up", slog.String("id", o.ID),
			slog.String("broker", o.Broker), slog.String("kind", o.Kind), slog.String("instance_id", o.InstanceID),
			slog.Int("attempts", o.Attempts), slog.String("error", o.LastError))
	} else {
		o.NextAttempt = g.Now().Add(schedule[o.Attempts-1])
	}
	g.putOrphan(ctx, o)
}

// putOrphan stores o back with its claim cleared.
func (g *Guard) putOrphan(ctx context.Context, o store.Orphan) {
	o.ClaimedBy, o.ClaimedUntil = "", time.Time{}
	if err := g.St.PutOrphan(ctx, o); err != nil && !errors.Is(err, context.Canceled) {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "orphan not rescheduled; its claim lapses and the next tick tries again",
			slog.String("id", o.ID), slog.String("error", err.Error()))
	}
}

// Undo sends the deprovision or unbind of o to the broker and returns its
// status and, for a 202, the broker's operation.
func Undo(u *upstream.Upstream, ctx context.Context, o store.Orphan) (int, string, error) {
	p := u.Target.JoinPath("v2", "service_instances", o.InstanceID)
	if o.Kind == store.KindUnbind {
		p = p.JoinPath("service_bindings", o.BindingID)
	}
	q := url.Values{"service_id": {o.ServiceID}, "plan_id": {o.PlanID}, "accepts_incomplete": {"true"}}
	if async := (rules.Call{Endpoint: rules.LockedBy(o.Kind), AcceptsIncomplete: true}); u.Max.Less(rules.RequiredVersion(async)) {
		q.Del("accepts_incomplete") // async unbind needs 2.14
	}
	p.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	req, err := u.OwnRequest(ctx, rules.LockedBy(o.Kind), "", http.MethodDelete, p.String())
	if err != nil {
		return 0, "", err
	}
	res, err := u.RT.RoundTrip(req)
	if err != nil {
		return 0, "", u.Failed(err)
	}
	if res.StatusCode != http.StatusAccepted {
		res.Body.Close()
		return res.StatusCode, "", nil
	}
	body, err := upstream.ReadOwn(res)
	if err != nil {
		return res.StatusCode, "", nil // accepted, its operation unread: polled without one
	}
	c := rules.Call{Endpoint: rules.LockedBy(o.Kind), InstanceID: o.InstanceID, BindingID: o.BindingID}
	return res.StatusCode, rules.ReadResponse(c, res.StatusCode, body).Operation, nil
}
