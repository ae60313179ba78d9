package main

// What the faults of faults_more.go excuse, and no more:
//
//   - a store-partition is a store outage for one replica: a 503 that
//     blames the store is excused for that replica's calls alone; what
//     its retry queue writes late (a lock's release, an inventory record)
//     lags as after any store outage, for every replica's readers;
//   - a disk-full under bolt is a store outage: mutating calls fail
//     closed with 503 (docs/faults.md);
//   - a redis-restart is an outage until the operator accepts the loss
//     (the gateways refuse a Redis that lost their data: fault.End is the
//     acceptance), and then a store that forgot what it held: excused for
//     the instances it held before the kill, and only that (forgotten);
//     nothing that began after the kill and ended before the acceptance
//     may succeed (i);
//   - a clock-jump, a rolling-restart and a reload excuse nothing.

import (
	"fmt"
	"slices"
	"time"
)

// storeFaulted reports whether the state store was faulted, as seen from
// replica (-1: any), between from and to: a fault of the whole store
// (paused, its shared link degraded, restarted, a full disk) or a
// partition of that replica.
func (v *verdict) storeFaulted(from, to time.Time, replica int) bool {
	if v.faulted(v.store, from, to, storeSide...) || v.faulted(v.store, from, to, fRedisRestart, fDiskFull) {
		return true
	}
	target := ""
	if replica >= 0 {
		target = fmt.Sprintf("gw%d", replica)
	}
	return v.faulted(target, from, to, fStoreCut)
}

// storeDown are the kinds of this file that fail the store's calls, for
// the locks of async operations (checkLockAges).
var storeDown = []string{fStoreCut, fRedisRestart, fDiskFull}

// wipes are the Redis restarts that really happened.
func (v *verdict) wipes() []*fault {
	var out []*fault
	for _, f := range v.faults {
		if f.Kind == fRedisRestart && f.Err == "" {
			out = append(out, f)
		}
	}
	return out
}

// forgotten is the restart of Redis that forgot what the store held of
// instance: one killed after an operation on the instance began (so its
// lock, record, orphan or async operation may have been in the store it
// lost). Nil when every operation on it began after the kill: from the
// kill to the acceptance of the loss the gateways refuse every call that
// needs the store (i), so what the store holds of it was written after
// the acceptance, and every promise holds.
func (v *verdict) forgotten(instance string) *fault {
	wipes := v.wipes()
	if len(wipes) == 0 || instance == "" {
		return nil
	}
	var first time.Time
	for _, o := range v.ops {
		if o.Instance == instance && (first.IsZero() || o.Start.Before(first)) {
			first = o.Start
		}
	}
	for _, w := range wipes {
		if !first.IsZero() && first.Before(w.Start) {
			return w
		}
	}
	return nil
}

// forgettable are the rules a store that forgot can break for what it
// held: (a), (b), (h) and (g) through the inventory it lost (emulate.gone
// answers 410 for a live instance, emulate.fetch 404, nothing records
// it), (b) through the orphans it lost, (e) and (f) through the locks
// and async operations it lost.
var forgettable = []string{"a", "b", "e", "f", "g", "h"}

// excuseForgotten turns the violations a Redis restart explains into
// notes: of a forgettable rule, on an instance the store held before the
// restart; what happened at a time, (e), (f) and (g), only after the kill,
// and for (e) and (f) only before the calls in flight at the kill had
// ended (a call's lock: syncLockBound after it).
func (v *verdict) excuseForgotten() {
	kept := v.violations[:0]
	for _, x := range v.violations {
		w := v.forgotten(x.Instance)
		excused := w != nil && slices.Contains(forgettable, x.Rule)
		if excused && (x.Rule == "e" || x.Rule == "f" || x.Rule == "g") {
			excused = !x.At.IsZero() && !x.At.Before(w.Start)
		}
		if excused && (x.Rule == "e" || x.Rule == "f") {
			excused = x.At.Before(w.Start.Add(syncLockBound))
		}
		if !excused {
			kept = append(kept, x)
			continue
		}
		v.notes = append(v.notes, fmt.Sprintf("(%s) excused: Redis restarted empty at %s (fault %d) and forgot what it held of %s: %s",
			x.Rule, w.Start.Format("15:04:05.000"), w.N, x.Instance, x.What))
	}
	v.violations = kept
}

// checkRefusedWhileLost is (i): from the kill of a Redis that restarts
// empty to the operator's acceptance of the loss, the gateways fail
// closed: no mutating call that began after the kill and ended before the
// acceptance succeeded (a gateway that went on with the empty store let
// them through), save one that shared the answer of an identical call in
// flight since before the kill (flights).
func (v *verdict) checkRefusedWhileLost() {
	for _, w := range v.wipes() {
		for _, o := range v.ops {
			if !o.mutating() || o.Status < 200 || o.Status >= 300 || o.Start.Before(w.Start) || !o.End.Before(w.End) ||
				v.sharedAnswer(o, w.Start) {
				continue
			}
			v.add("i", fmt.Sprintf("%s: succeeded while Redis had lost the gateways' data (killed %s, the loss accepted %s)",
				o, w.Start.Format("15:04:05.000"), w.End.Format("15:04:05.000")), o.Instance, o.Start, o.End)
		}
	}
}

// sharedAnswer reports whether an identical call to o (same tenant,
// kind, instance and binding) began before the time before and was still
// in flight when o began: o may have been given its answer.
func (v *verdict) sharedAnswer(o *op, before time.Time) bool {
	for _, p := range v.ops {
		if p != o && p.Tenant == o.Tenant && p.Kind == o.Kind && p.Instance == o.Instance && p.Binding == o.Binding &&
			p.Start.Before(before) && !p.End.Before(o.Start) {
			return true
		}
	}
	return false
}

// lockStart is when the lock l began, by the campaign's clock: its
// Started, the gateway's, unless a gateway's clock was stepped back
// around when the audit first saw it (then Started is that much early,
// and the lock began at most an audit tick and a second before it was
// first seen).
func (v *verdict) lockStart(l *seenLock) time.Time {
	if l.First.IsZero() || !l.Started.Before(l.First.Add(-lockAuditSlack)) {
		return l.Started
	}
	for _, f := range v.faults {
		if start, end, ok := window(f); ok && f.Kind == fClockJump && f.Offset < 0 &&
			!start.After(l.First) && !end.Before(l.First.Add(-lockAuditSlack)) {
			return l.First.Add(-lockAuditSlack)
		}
	}
	return l.Started
}

// lockAuditSlack is how long before the audit first saw a lock it may
// have begun: a tick of the audit (2 s) and a second.
const lockAuditSlack = 3 * time.Second
