package store

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// ServerTimer is a backend whose server keeps one clock for every replica
// that shares it: Redis (TIME) and PostgreSQL (clock_timestamp()).
type ServerTimer interface {
	// ServerTime is the server's clock now, or an error wrapping
	// ErrUnavailable.
	ServerTime(ctx context.Context) (time.Time, error)
}

// ServerClock is the clock of a replica that shares its store: the store
// server's time, read by Sync and carried forward between reads on this
// process's monotonic clock, which no step of the wall clock moves.
//
// A lock's Deadline is a time its writer's clock set, and every replica
// judges it by its own: with the machine's wall clock, a replica stepped
// back writes locks the others take as expired, and one stepped forward
// takes theirs (the fault campaign's clock-jump on Redis and PostgreSQL).
// On the server's clock every replica sets and judges deadlines on one
// time base, whatever its machine's clock does, to within half a round
// trip to the server and what the monotonic clock drifts between reads
// (the kernel slews it with NTP's frequency, never steps it).
//
// Until its first Sync the clock is its local clock (a store that does
// not answer at start). A read that fails keeps the last one: the clock
// runs on, and the store's own refusals apply. A read that finds the
// server more than a second from where the clock stood (the server's
// clock stepped, or a failover reached a server whose clock differs)
// follows the server, and says so to OnStep. Now is safe for concurrent
// use.
type ServerClock struct {
	src    ServerTimer
	local  func() time.Time
	anchor atomic.Pointer[anchor]
	// OnStep, if set before the first Sync, is told of every read that
	// moved the clock by more than a second: by how much (after minus
	// before).
	OnStep func(step time.Duration)
	mu     sync.Mutex // one Sync at a time
}

// anchor is the server's time at one reading of the monotonic clock.
type anchor struct {
	server time.Time // no monotonic reading
	mono   time.Time // time.Now, with its monotonic reading
}

// NewServerClock is a clock that is local (nil means time.Now) until it
// follows a server (Follow) and reads its clock (Sync).
func NewServerClock(local func() time.Time) *ServerClock {
	if local == nil {
		local = time.Now
	}
	return &ServerClock{local: local}
}

// Follow sets the server whose clock Sync reads: the store opened with
// this clock's Now, so the clock comes first and its server after.
func (c *ServerClock) Follow(src ServerTimer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.src = src
}

// Now is the server's time now, as the last Sync read it and the
// monotonic clock carried it; before any Sync, the local clock. The time
// has no monotonic reading: it is the server's wall time.
func (c *ServerClock) Now() time.Time {
	a := c.anchor.Load()
	if a == nil {
		return c.local()
	}
	return a.server.Add(time.Since(a.mono))
}

// Synced reports whether a Sync has read the server's clock.
func (c *ServerClock) Synced() bool { return c.anchor.Load() != nil }

// syncReads is how many times Sync reads the server; it keeps the read of
// the shortest round trip, whose error is the smallest.
const syncReads = 3

// Sync reads the server's clock and sets the clock on it. On an error it
// keeps the last reading (and returns the error).
func (c *ServerClock) Sync(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		return fmt.Errorf("%w: the clock follows no server", ErrUnavailable)
	}
	var (
		best    *anchor
		bestRTT time.Duration
		lastErr error
	)
	for range syncReads {
		sent := time.Now()
		t, err := c.src.ServerTime(ctx)
		rtt := time.Since(sent)
		if err != nil {
			lastErr = err
			break
		}
		if best == nil || rtt < bestRTT {
			// The server read its clock somewhere in the round trip:
			// take the middle.
			best, bestRTT = &anchor{server: t.Round(0), mono: sent.Add(rtt / 2)}, rtt
		}
	}
	if best == nil {
		return lastErr
	}
	if old := c.anchor.Load(); old != nil && c.OnStep != nil {
		before := old.server.Add(best.mono.Sub(old.mono))
		if step := best.server.Sub(before); step > time.Second || step < -time.Second {
			c.OnStep(step)
		}
	}
	c.anchor.Store(best)
	return nil
}

// ServerClockEvery is how often Run reads the server's clock once it has
// read it; before that, ServerClockRetry.
const (
	ServerClockEvery = 10 * time.Second
	ServerClockRetry = time.Second
)

// Run syncs the clock every ServerClockEvery (every ServerClockRetry until
// the first Sync succeeds) until ctx ends; failed reads go to fail, and
// successful ones to ok, if not nil.
func (c *ServerClock) Run(ctx context.Context, fail func(error), ok func()) {
	for {
		wait := ServerClockEvery
		if !c.Synced() {
			wait = ServerClockRetry
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Sync(sctx)
		cancel()
		switch {
		case err != nil && ctx.Err() == nil && fail != nil:
			fail(err)
		case err == nil && ok != nil:
			ok()
		}
	}
}
