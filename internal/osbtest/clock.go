package osbtest

import (
	"sync"
	"time"
)

// Clock is an injected clock that moves only when told. Its Now method is
// what the gateway's constructors take as their now func() time.Time.
// It is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at start, without its monotonic
// reading (Round(0)): a fake clock's times are wall times only, as a
// store's Steady expects of a clock that is not the machine's.
func NewClock(start time.Time) *Clock { return &Clock{t: start.Round(0)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d (back for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
