package bolt

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// TestLockOutlivesAWallClockStep is the campaign's clock-jump on bolt: the
// gateway's wall clock stepped forward by minutes while a call held its
// lock (deadline: the broker's timeout plus a minute), and the sweep
// released it at once, so another call on the instance reached the broker
// beside the first. Locks this process wrote now live their time on the
// monotonic clock, whichever way the wall clock steps.
func TestLockOutlivesAWallClockStep(t *testing.T) {
	ctx := context.Background()
	var step atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	st := openBoltAt(t, filepath.Join(t.TempDir(), "state.db"), now)
	lock := func(id, owner string) store.Lock {
		return store.Lock{Key: store.LockKey("b", id), Owner: owner, Kind: store.KindProvision, Broker: "b", InstanceID: id,
			Deadline: now().Add(64 * time.Second)}
	}
	held := func(what, id string) {
		t.Helper()
		if _, err := st.Acquire(ctx, lock(id, "another call")); !errors.Is(err, store.ErrHeld) {
			t.Errorf("%s: another call's Acquire of %s = %v, want held", what, id, err)
		}
		l, err := st.Get(ctx, store.LockKey("b", id))
		if err != nil || !l.Deadline.After(now()) {
			t.Errorf("%s: Get of %s = deadline %s, %v; want live after %s", what, id, l.Deadline, err, now())
		}
	}
	if _, err := st.Acquire(ctx, lock("i1", "call 1")); err != nil {
		t.Fatal(err)
	}
	step.Store(int64(10 * time.Minute))
	if gone, err := st.ExpireDue(ctx, now()); err != nil || len(gone) != 0 {
		t.Fatalf("the sweep after a step of +10m released %v, %v; want none", gone, err)
	}
	held("after a step of +10m", "i1")
	ls, err := st.List(ctx, store.ListFilter{Expired: true})
	if err != nil || len(ls) != 1 || !ls[0].Deadline.After(now()) {
		t.Errorf("List(Expired) after the step = %v, %v; want the lock, its Deadline after now", ls, err)
	}
	if err := st.Release(ctx, store.LockKey("b", "i1"), "call 1"); err != nil {
		t.Errorf("the owner's Release after the step: %v", err)
	}

	step.Store(int64(-10 * time.Minute)) // a lock taken while the clock is 10 minutes behind,
	if _, err := st.Acquire(ctx, lock("i2", "call 2")); err != nil {
		t.Fatal(err)
	}
	step.Store(0) // then it steps forward again: its Deadline passed 9 minutes ago
	if gone, err := st.ExpireDue(ctx, now()); err != nil || len(gone) != 0 {
		t.Fatalf("the sweep after the clock stepped back to time released %v, %v; want none", gone, err)
	}
	held("after a step of -10m and back", "i2")

	// A lock taken while the clock is 10 minutes ahead, with 100 ms to
	// live: after the clock steps back its Deadline is 10 minutes away,
	// and it still expires on time.
	step.Store(int64(10 * time.Minute))
	short := lock("i3", "call 3")
	short.Deadline = now().Add(100 * time.Millisecond)
	if _, err := st.Acquire(ctx, short); err != nil {
		t.Fatal(err)
	}
	step.Store(0)
	deadline := time.Now().Add(5 * time.Second)
	for {
		gone, err := st.ExpireDue(ctx, now())
		if err != nil {
			t.Fatal(err)
		}
		if len(gone) == 1 && gone[0].Key == short.Key {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a lock of 100 ms taken 10 minutes ahead is not expired 5 s after the clock stepped back (swept %v)", gone)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := st.Acquire(ctx, lock("i3", "another call")); err != nil {
		t.Errorf("Acquire after the short lock expired: %v", err)
	}
}

// TestLockOfTheLastProcessOutlivesAStep: the campaign's kill -9 of the bolt
// gateway during an async deprovision, then a step of +7m44s of the new
// process's wall clock: the sweep released the dead process's lock (its
// deadline two minutes away), the platform's poll that saw the deletion end
// found no lock, and the inventory kept the instance (h). The locks found
// at the start keep the time they had then.
func TestLockOfTheLastProcessOutlivesAStep(t *testing.T) {
	ctx := context.Background()
	var step atomic.Int64
	now := func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	path := filepath.Join(t.TempDir(), "state.db")
	first, err := Open(path, 100*time.Millisecond, now)
	if err != nil {
		t.Fatal(err)
	}
	l := store.Lock{Key: store.LockKey("b", "i1"), Owner: "call 1", Kind: store.KindDeprovision, Broker: "b", InstanceID: "i1",
		Async: true, Started: now(), Deadline: now().Add(2 * time.Minute)}
	if _, err := first.Acquire(ctx, l); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	st := openBoltAt(t, path, now)
	step.Store(int64(7*time.Minute + 44*time.Second))
	if gone, err := st.ExpireDue(ctx, now()); err != nil || len(gone) != 0 {
		t.Fatalf("the sweep of the new process after a step of +7m44s released %v, %v; want none", gone, err)
	}
	got, err := st.Get(ctx, l.Key)
	if err != nil || got.Owner != "call 1" || !got.Deadline.After(now()) || got.Started.After(now()) || now().Sub(got.Started) > time.Minute {
		t.Errorf("Get after the step = %+v, %v; want the lock, started a moment ago by the stepped clock, its deadline ahead", got, err)
	}
}
