package store

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// fakeServer is a server whose clock is the machine's moved by an offset
// the test sets, and that can be made not to answer.
type fakeServer struct {
	mu     sync.Mutex
	offset time.Duration
	down   bool
	reads  int
}

func (f *fakeServer) ServerTime(context.Context) (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.down {
		return time.Time{}, ErrUnavailable
	}
	return time.Now().Add(f.offset).Round(0), nil
}

func (f *fakeServer) set(offset time.Duration, down bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.offset, f.down = offset, down
}

// near fails t unless got is within tol of want.
func near(t *testing.T, what string, got, want time.Time, tol time.Duration) {
	t.Helper()
	if d := got.Sub(want); d > tol || d < -tol {
		t.Fatalf("%s = %s, want %s (±%s): off by %s", what, got.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano), tol, d)
	}
}

// TestServerClockFollowsTheServerNotTheWallClock: a replica's clock is
// its local one until it reads the server's, and from then on the
// server's, whatever the local wall clock does: a replica whose machine
// stepped ten minutes sets and judges deadlines on the others' time.
func TestServerClockFollowsTheServerNotTheWallClock(t *testing.T) {
	var (
		mu   sync.Mutex
		step time.Duration
	)
	local := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(step) }
	srv := &fakeServer{offset: 3 * time.Hour}
	c := NewServerClock(local)
	const tol = time.Second // the reads' round trips on a busy machine, and more

	if err := c.Sync(context.Background()); err == nil {
		t.Fatal("Sync without a server: nil error")
	}
	near(t, "Now before any Sync", c.Now(), time.Now(), tol)
	if c.Synced() {
		t.Fatal("Synced before any read of the server")
	}

	c.Follow(srv)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !c.Synced() || srv.reads != syncReads {
		t.Fatalf("Synced %v after %d reads, want true after %d", c.Synced(), srv.reads, syncReads)
	}
	near(t, "Now after Sync", c.Now(), time.Now().Add(3*time.Hour), tol)
	if n := c.Now(); n != n.Round(0) {
		t.Fatal("Now carries a monotonic reading: it must be the server's wall time")
	}

	mu.Lock()
	step = 10 * time.Minute // the machine's wall clock steps
	mu.Unlock()
	near(t, "Now after the wall clock stepped", c.Now(), time.Now().Add(3*time.Hour), tol)

	// The server stops answering: the clock runs on from the last reading.
	srv.set(3*time.Hour, true)
	if err := c.Sync(context.Background()); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Sync of a server that does not answer = %v, want ErrUnavailable", err)
	}
	near(t, "Now after a failed Sync", c.Now(), time.Now().Add(3*time.Hour), tol)
}

// TestServerClockFollowsAStepOfTheServer: a read that finds the server a
// minute from where the clock stood (its clock stepped, or a failover
// reached a server whose clock differs) follows the server and says so;
// a read that agrees says nothing.
func TestServerClockFollowsAStepOfTheServer(t *testing.T) {
	srv := &fakeServer{}
	c := NewServerClock(nil)
	c.Follow(srv)
	var steps []time.Duration
	c.OnStep = func(d time.Duration) { steps = append(steps, d) }
	for range 2 {
		if err := c.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if len(steps) != 0 {
		t.Fatalf("steps %v of a server that did not step", steps)
	}
	srv.set(-time.Minute, false)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	near(t, "Now after the server stepped", c.Now(), time.Now().Add(-time.Minute), time.Second)
	if len(steps) != 1 || steps[0] > -59*time.Second || steps[0] < -61*time.Second {
		t.Fatalf("steps %v, want one of about -1m", steps)
	}
}

// TestServerClockRunRetriesUntilItReads: Run reads the server until a
// read succeeds, then less often, and stops with its context.
func TestServerClockRunRetriesUntilItReads(t *testing.T) {
	srv := &fakeServer{down: true}
	c := NewServerClock(nil)
	c.Follow(srv)
	ctx, cancel := context.WithCancel(context.Background())
	failed, synced := make(chan struct{}, 100), make(chan struct{}, 100)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx, func(error) { failed <- struct{}{} }, func() { synced <- struct{}{} })
	}()
	deadline := time.After(30 * time.Second)
	select {
	case <-failed:
	case <-deadline:
		t.Fatal("Run did not report a failed read of a server that does not answer")
	}
	srv.set(0, false)
	select {
	case <-synced:
	case <-deadline:
		t.Fatal("Run did not read the server once it answered")
	}
	if !c.Synced() {
		t.Fatal("not Synced after Run's read")
	}
	cancel()
	select {
	case <-done:
	case <-deadline:
		t.Fatal("Run did not stop with its context")
	}
}
