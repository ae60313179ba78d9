// Package metrics holds the Prometheus series shared by every layer of the
// request path that are not the call counters of package proxy: the
// configuration's reloads, and the cached store reads that scrapes show.
package metrics

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// CachedRead is a read of the store that scrapes show, done at most once
// per refresh and within timeout: scrapes between two reads show the last
// result, so the store is read once per refresh whatever the number of
// scrapers and their interval (osb_gateway_bindings_expiring,
// osb_gateway_instances). A failed read keeps the last result, counts as
// a store error of op, and waits for the next refresh too: a store that
// is down is not asked again by every scrape.
type CachedRead[T any] struct {
	now              func() time.Time
	refresh, timeout time.Duration
	errs             *prometheus.CounterVec // the store errors' family
	op               string
	read             atomic.Pointer[func(context.Context) (T, error)]

	mu   sync.Mutex // serializes the reads; scrapes meanwhile wait for the result
	last T
	at   time.Time // when last was read (or a read failed); zero: never
}

// NewCachedRead returns a CachedRead without a read (Set); now nil:
// time.Now.
func NewCachedRead[T any](now func() time.Time, refresh, timeout time.Duration, errs *prometheus.CounterVec, op string) *CachedRead[T] {
	if now == nil {
		now = time.Now
	}
	return &CachedRead[T]{now: now, refresh: refresh, timeout: timeout, errs: errs, op: op}
}

// Set replaces the read and forgets the last result; nil reads nothing.
func (c *CachedRead[T]) Set(read func(context.Context) (T, error)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero T
	c.last, c.at = zero, time.Time{}
	if read == nil {
		c.read.Store(nil)
		return
	}
	c.read.Store(&read)
}

// Get returns the last result, reading again first when it is older than
// refresh; ok is false while no read is set.
func (c *CachedRead[T]) Get() (last T, ok bool) {
	read := c.read.Load()
	if read == nil {
		return last, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if now := c.now(); c.at.IsZero() || now.Sub(c.at) >= c.refresh {
		ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
		got, err := (*read)(ctx)
		cancel()
		c.at = now
		if err != nil {
			c.errs.WithLabelValues(c.op).Inc()
		} else {
			c.last = got
		}
	}
	return c.last, true
}
