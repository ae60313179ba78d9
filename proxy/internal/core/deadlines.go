package core

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/lean"
)

// ErrBrokerTimeout is the cause a broker call is canceled with when it
// outlives the broker's timeout; it wraps context.DeadlineExceeded.
var ErrBrokerTimeout = fmt.Errorf("the broker's timeout passed: %w", context.DeadlineExceeded)

// CallDeadlines cancels the broker calls of one upstream that outlive its
// timeout. A call costs a cancelable context and two list operations under
// a mutex instead of a timer of its own: every call of an upstream has the
// same timeout, so calls expire in the order they started, and one
// goroutine sleeps until the oldest call's deadline. It wakes about once
// per timeout while calls come and go, and exits after a timeout with
// none. Measured against context.WithTimeoutCause per call
// (BenchmarkChainCanned, callgrind): a proxied call 2 allocations and 180 B
// lighter and 3% fewer instructions. Safe for concurrent use.
type CallDeadlines struct {
	Timeout time.Duration

	mu         sync.Mutex
	head, tail *CallNode
	running    bool // a sweeper goroutine is on duty
}

// CallNode is one call in flight; it lives in the call's Scope.
type CallNode struct {
	prev, next *CallNode
	deadline   time.Duration           // from callEpoch; 0: not listed
	cancel     context.CancelCauseFunc // the call's own context's; nil: req's
	req        lean.Canceler           // the request's, when the call has no context of its own
}

// End ends n's call with cause; nil: the call is over (its own context
// is released; the request's ends with the request).
func (n *CallNode) End(cause error) {
	switch {
	case n.cancel != nil:
		n.cancel(cause)
	case cause != nil:
		n.req.Cancel(cause)
	}
}

// callEpoch is the origin of the monotonic readings of CallDeadlines.
var callEpoch = time.Now()

// clock reads the monotonic clock as an offset from callEpoch.
func clock() time.Duration { return time.Since(callEpoch) }

// Start derives the call's context from parent and lists n until Finish,
// which must be called once the call is over. A request the lean server
// runs is canceled through its own context (lean.CancelerOf): the call is
// the request's last step, and a context of its own would cost a child
// registration in the request's and the transport's AfterFunc another in
// it.
func (d *CallDeadlines) Start(parent context.Context, n *CallNode) context.Context {
	ctx := parent
	if k, ok := lean.CancelerOf(parent); ok {
		n.cancel, n.req = nil, k
	} else {
		ctx, n.cancel = context.WithCancelCause(parent)
		n.req = lean.Canceler{}
	}
	n.deadline = max(clock()+d.Timeout, 1) // never 0: listed
	d.mu.Lock()
	n.prev, n.next = d.tail, nil
	if d.tail != nil {
		d.tail.next = n
	} else {
		d.head = n
	}
	d.tail = n
	if !d.running {
		d.running = true
		go d.sweep()
	}
	d.mu.Unlock()
	return ctx
}

// Finish unlists n and releases its context.
func (d *CallDeadlines) Finish(n *CallNode) {
	d.mu.Lock()
	d.unlink(n)
	d.mu.Unlock()
	n.End(nil)
}

func (d *CallDeadlines) unlink(n *CallNode) {
	if n.deadline == 0 {
		return
	}
	if n.prev != nil {
		n.prev.next = n.next
	} else {
		d.head = n.next
	}
	if n.next != nil {
		n.next.prev = n.prev
	} else {
		d.tail = n.prev
	}
	n.prev, n.next, n.deadline = nil, nil, 0
}

// sweep cancels expired calls, sleeping until the oldest call's deadline
// (or for one timeout while none is listed: a call listed meanwhile
// expires no sooner), and returns after a timeout without calls.
func (d *CallDeadlines) sweep() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	idle := false
	for {
		var expired []*CallNode
		d.mu.Lock()
		now := clock()
		for d.head != nil && d.head.deadline <= now {
			n := d.head
			d.unlink(n)
			expired = append(expired, n)
		}
		wait := d.Timeout
		switch {
		case d.head != nil:
			wait, idle = d.head.deadline-now, false
		case idle && len(expired) == 0:
			d.running = false
			d.mu.Unlock()
			return
		default:
			idle = true
		}
		d.mu.Unlock()
		for _, n := range expired {
			n.End(ErrBrokerTimeout)
		}
		t.Reset(wait)
		<-t.C
	}
}
