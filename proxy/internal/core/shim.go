package core

import (
	"context"
	"sync/atomic"
)

// Where a call the async shim (brokers[].emulate.async_after) may answer
// for stands (ShimCall.State).
const (
	ShimRunning  int32 = iota // the broker call runs; the platform waits
	ShimDirect                // the broker's answer (or the failure) goes to the platform, as without the shim
	ShimClaiming              // the timer fired: the shim is recording its operation
	ShimShimmed               // the platform got the shim's 202; the outcome goes into the lock
)

// ShimCall is one call the async shim may answer 202 for. State is shared
// by the platform's handler and the goroutine of the broker call; the
// other fields are each written by one side before a channel orders them.
type ShimCall struct {
	State atomic.Int32
	// Recorded is closed once a claim (ShimClaiming) is decided:
	// ShimShimmed, or ShimDirect when the store did not take it.
	Recorded chan struct{}
	// Done is closed when the goroutine of the broker call has ended.
	Done chan struct{}
	// Operation is the operation the platform gets with the 202.
	Operation string
	// TimedOut is set by the broker call's goroutine when the broker did
	// not answer within its timeout after the 202 went out.
	TimedOut bool
	// Panicked is what the broker call panicked with, for the platform's
	// handler to panic with again (written before Done is closed).
	Panicked any
	// Record, when set by the broker call's goroutine, writes the
	// inventory record of the call's answer, which the store did not take:
	// the retry queue writes it before the outcome (the shim's concludeShim).
	Record func(context.Context) error
}

// Shimmed reports whether the platform got (or is getting) the shim's 202,
// so that the broker's answer, or its absence, is the shim's to record; the
// first caller before the timer makes it false for good. nil: false.
func (c *ShimCall) Shimmed() bool {
	if c == nil {
		return false
	}
	if c.State.CompareAndSwap(ShimRunning, ShimDirect) || c.State.Load() == ShimDirect {
		return false
	}
	<-c.Recorded
	return c.State.Load() == ShimShimmed
}
