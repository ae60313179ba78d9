package store_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// steppedClock is time.Now moved by a step that can change, as a stepped
// machine clock reads (its monotonic reading moves with it here, as
// internal/clockjump's does; Steady keeps its own).
type steppedClock struct{ step atomic.Int64 }

func (c *steppedClock) now() time.Time { return time.Now().Add(time.Duration(c.step.Load())) }

// TestSteadyThroughAStepForward: a lock this process wrote lives its time
// through a step forward of the wall clock, and is shown with the Deadline
// that time gives.
func TestSteadyThroughAStepForward(t *testing.T) {
	var c steppedClock
	var s store.Steady
	now := c.now()
	l := store.Lock{Key: "b/i1", Owner: "o1", Deadline: now.Add(time.Minute)}
	s.Wrote(l, now)
	c.step.Store(int64(10 * time.Minute))
	now = c.now()
	if s.Expired(l, now) {
		t.Fatal("a step forward of 10 minutes expired a lock with a minute left")
	}
	if d := s.Shown(l, now).Deadline; !d.After(now) || d.After(now.Add(time.Minute)) {
		t.Errorf("shown Deadline %s, want within a minute after %s", d, now)
	}
	other := l
	other.Owner = "o2" // the same key, written by another process: its Deadline alone
	if !s.Expired(other, now) {
		t.Error("a lock of another owner was kept alive")
	}
	s.Gone(l.Key, "o2")
	if s.Expired(l, now) {
		t.Error("Gone of another owner forgot the lock")
	}
	s.Gone(l.Key, "o1")
	if !s.Expired(l, now) {
		t.Error("a lock released and gone is still kept alive")
	}
}

// TestSteadyWithAFakeClock: a fake clock (no monotonic reading) leaves
// expiry to the Deadline alone, as every backend's contract tests expect.
func TestSteadyWithAFakeClock(t *testing.T) {
	c := osbtest.NewClock(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	var s store.Steady
	l := store.Lock{Key: "b/i1", Owner: "o1", Deadline: c.Now().Add(time.Minute)}
	s.Wrote(l, c.Now())
	c.Advance(time.Minute)
	if !s.Expired(l, c.Now()) {
		t.Error("a lock at its Deadline on a fake clock is not expired")
	}
	if got := s.Shown(l, c.Now()); !got.Deadline.Equal(l.Deadline) {
		t.Errorf("Shown moved the Deadline to %s", got.Deadline)
	}
}
