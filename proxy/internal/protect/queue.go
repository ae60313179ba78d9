// Package protect is the protection stages: the in-flight gate
// (listen.max_in_flight, WithOverload), the tenants' and routes' rate
// limits (WithRateLimit, local or shared through Redis), and each broker's
// cap on calls in flight with its fair queue and its circuit breaker
// (WithBrokerProtect, WithBrokerCall). Each answers in the broker's place
// with 429 for a call that may be mutating, 503 for a read, and records
// what it did in Scope.Protection. It imports the core and the metrics
// service, and no other stage.
package protect

import (
	"container/list"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// ErrQueueTimeout is what a call gets that waited its broker's whole
// queue_timeout (or could not wait: queue_timeout 0) without a slot.
var ErrQueueTimeout = errors.New("no slot within queue_timeout")

// Queue caps the calls in flight to one broker (max_in_flight).
// A call over the cap waits up to queue_timeout for a slot. Waiting calls
// stand in one line per tenant, first come first served; when a slot frees,
// the lines take turns (round-robin), so one tenant's burst holds another
// tenant's single call back by at most one call of each other tenant with
// calls waiting. A slot that frees while calls wait is handed to the next
// of them directly, so no newcomer overtakes a waiting call. Safe for
// concurrent use.
type Queue struct {
	Max     int           // max_in_flight
	Timeout time.Duration // queue_timeout; 0: refuse at once
	// Timer starts the wait of one call; tests replace it to fire at
	// will. Set before the queue is used.
	Timer core.Timer

	mu       sync.Mutex
	inFlight int // calls holding a slot
	queued   int // calls waiting
	lines    map[string]*tenantLine
	ring     []*tenantLine // the lines with calls waiting, in turn order
	next     int           // index in ring of the line served next
}

// tenantLine is the calls of one tenant waiting for a slot, oldest first.
type tenantLine struct {
	waiting list.List // of *waiter
	inRing  bool
}

// waiter is one call waiting for a slot.
type waiter struct {
	ready   chan struct{} // closed when granted
	granted bool          // set under mu when a slot was handed over
	line    *tenantLine
	elem    *list.Element
}

// NewQueue returns a Queue of max slots whose calls wait up to timeout
// (0: refused at once) for one.
func NewQueue(max int, timeout time.Duration) *Queue {
	return &Queue{Max: max, Timeout: timeout, Timer: core.RealTimer, lines: map[string]*tenantLine{}}
}

// TryAcquire takes a slot when one is free and no call waits.
func (q *Queue) TryAcquire() bool {
	q.mu.Lock()
	ok := q.inFlight < q.Max && q.queued == 0
	if ok {
		q.inFlight++
	}
	q.mu.Unlock()
	return ok
}

// Wait waits in tenant's line for a slot, for a call tryAcquire found
// none for, until one is handed over, queue_timeout passes
// (ErrQueueTimeout; at once for 0) or ctx ends (its error). It returns how
// long the call waited. On success the caller holds a slot and must
// Release it.
func (q *Queue) Wait(ctx context.Context, tenant string) (time.Duration, error) {
	start := time.Now()
	w := &waiter{ready: make(chan struct{})}
	q.mu.Lock()
	if q.inFlight < q.Max && q.queued == 0 { // freed meanwhile
		q.inFlight++
		q.mu.Unlock()
		return 0, nil
	}
	if q.Timeout <= 0 {
		q.mu.Unlock()
		return 0, ErrQueueTimeout
	}
	w.line = q.lines[tenant]
	if w.line == nil {
		w.line = &tenantLine{}
		q.lines[tenant] = w.line
	}
	w.elem = w.line.waiting.PushBack(w)
	if !w.line.inRing {
		w.line.inRing = true
		q.ring = append(q.ring, w.line)
	}
	q.queued++
	q.mu.Unlock()

	fired, stop := q.Timer(q.Timeout)
	var err error
	select {
	case <-w.ready:
		stop()
		return time.Since(start), nil
	case <-fired:
		err = ErrQueueTimeout
	case <-ctx.Done():
		err = ctx.Err()
		stop()
	}
	q.mu.Lock()
	if w.granted { // handed a slot just as the wait ended
		if ctx.Err() == nil {
			q.mu.Unlock()
			return time.Since(start), nil
		}
		q.releaseLocked() // the platform is gone: pass the slot on
		q.mu.Unlock()
		return time.Since(start), err
	}
	q.leaveLocked(w)
	q.mu.Unlock()
	return time.Since(start), err
}

// Release gives back a slot: to the next waiting call, in turn, or to the
// pool.
func (q *Queue) Release() {
	q.mu.Lock()
	q.releaseLocked()
	q.mu.Unlock()
}

func (q *Queue) releaseLocked() {
	if q.queued == 0 {
		q.inFlight--
		return
	}
	line := q.ring[q.next]
	w := line.waiting.Remove(line.waiting.Front()).(*waiter)
	q.queued--
	w.granted = true
	close(w.ready)
	if line.waiting.Len() == 0 {
		q.dropLine(q.next) // the next line moves up to q.next
		return
	}
	q.next = (q.next + 1) % len(q.ring)
}

// leaveLocked takes w out of its line: it stops waiting.
func (q *Queue) leaveLocked(w *waiter) {
	w.line.waiting.Remove(w.elem)
	q.queued--
	if w.line.waiting.Len() > 0 {
		return
	}
	for i, l := range q.ring {
		if l == w.line {
			if i < q.next {
				q.next--
			}
			q.dropLine(i)
			return
		}
	}
}

// dropLine takes the empty line at ring index i out of the ring.
func (q *Queue) dropLine(i int) {
	q.ring[i].inRing = false
	copy(q.ring[i:], q.ring[i+1:])
	q.ring[len(q.ring)-1] = nil
	q.ring = q.ring[:len(q.ring)-1]
	if q.next >= len(q.ring) {
		q.next = 0
	}
}

// Counts returns the calls in flight and waiting.
func (q *Queue) Counts() (inFlight, queued int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.inFlight, q.queued
}
