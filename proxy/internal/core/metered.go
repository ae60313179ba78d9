package core

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Clock is a clock read as offsets (ticks): Now is the gateway's clock,
// nil for the real one, read as cheaply as it can be.
type Clock struct {
	Now func() time.Time
}

// tickEpoch is the origin of tick readings.
var tickEpoch = time.Now()

// Since returns the time elapsed since t, which the clock gave. On the
// real clock that is one monotonic clock read (time.Since), where time.Now
// reads the wall clock too.
func (c *Clock) Since(t time.Time) time.Duration {
	if c.Now == nil {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// Tick reads the clock as an offset from an epoch; the difference of two
// ticks is the time between them.
func (c *Clock) Tick() time.Duration { return c.Since(tickEpoch) }

// MeteredBody observes the time since Start (a tick of Clock) once, when
// the body is first closed. It holds what it needs directly; a platform
// call's lives in its Scope, so metering costs no allocation.
type MeteredBody struct {
	io.ReadCloser
	Clock *Clock
	Obs   prometheus.Observer
	Start time.Duration
	done  uint32 // 1 once observed (atomic; a plain word so a Scope may be copied)
	InUse bool   // set when a Scope's own MeteredBody is taken
}

// Close implements io.Closer.
func (b *MeteredBody) Close() error {
	err := b.ReadCloser.Close()
	if atomic.CompareAndSwapUint32(&b.done, 0, 1) {
		b.Obs.Observe((b.Clock.Tick() - b.Start).Seconds())
	}
	return err
}
