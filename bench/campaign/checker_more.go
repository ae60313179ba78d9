package main

// What the faults of faults_more.go excuse, and no more:
//
//   - a store-partition is a store outage for one replica: a 503 that
//     blames the store is excused for that replica's calls alone; what
//     its retry queue writes late (a lock's release, an inventory record)
//     lags as after any store outage, for every replica's readers;
//   - a disk-full under bolt is a store outage: mutating calls fail
//     closed with 503 (docs/faults.md);
//   - a redis-restart is an outage, and then a store that forgot
//     everything: excused for what the store held before it, and only
//     that (forgotten);
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
// instance: one that ended after an operation on the instance began (so
// its lock, record, orphan or async operation may have been in the store
// it lost). Nil when every operation on it began after the last restart:
// what the store holds of it was written since, and every promise holds.
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
		if !first.IsZero() && first.Before(w.End) {
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
// restart; for (e) and (f), only for what happened before the operations
// in progress at the restart had ended (a call's lock: syncLockBound
// after it).
func (v *verdict) excuseForgotten() {
	kept := v.violations[:0]
	for _, x := range v.violations {
		w := v.forgotten(x.Instance)
		excused := w != nil && slices.Contains(forgettable, x.Rule)
		if excused && (x.Rule == "e" || x.Rule == "f") {
			excused = !x.At.IsZero() && x.At.Before(w.End.Add(syncLockBound))
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
