package core

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestCallDeadlinesCancelExpiredCalls(t *testing.T) {
	d := &CallDeadlines{Timeout: 30 * time.Millisecond}
	var slow, quick CallNode
	start := time.Now()
	slowCtx := d.Start(context.Background(), &slow)
	quickCtx := d.Start(context.Background(), &quick)
	d.Finish(&quick) // answered in time
	select {
	case <-slowCtx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call past its timeout was not canceled")
	}
	if waited := time.Since(start); waited < d.Timeout {
		t.Errorf("canceled after %v, before the timeout of %v", waited, d.Timeout)
	}
	if cause := context.Cause(slowCtx); !errors.Is(cause, ErrBrokerTimeout) || !errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("cause %v, want ErrBrokerTimeout wrapping context.DeadlineExceeded", cause)
	}
	if cause := context.Cause(quickCtx); errors.Is(cause, context.DeadlineExceeded) {
		t.Errorf("a call finished in time has cause %v", cause)
	}
	d.Finish(&slow)
	// With no call left the sweeper goes off duty within two timeouts.
	deadline := time.Now().Add(5 * time.Second)
	for {
		d.mu.Lock()
		running := d.running
		d.mu.Unlock()
		if !running {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sweeper is still running with no call listed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	// And comes back for the next call.
	var again CallNode
	ctx := d.Start(context.Background(), &again)
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("a call listed after the sweeper went off duty was not canceled")
	}
	d.Finish(&again)
}

func TestCallDeadlinesFollowTheParent(t *testing.T) {
	d := &CallDeadlines{Timeout: time.Hour}
	parent, cancel := context.WithCancel(context.Background())
	var n CallNode
	ctx := d.Start(parent, &n)
	cancel()
	<-ctx.Done()
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		t.Errorf("a call whose platform went away has cause %v", context.Cause(ctx))
	}
	d.Finish(&n)
	if d.head != nil || d.tail != nil {
		t.Error("a finished call is still listed")
	}
}

// TestCallDeadlinesConcurrent: calls that start and finish concurrently
// leave the list empty and are canceled only when late (run with -race).
func TestCallDeadlinesConcurrent(t *testing.T) {
	d := &CallDeadlines{Timeout: 200 * time.Millisecond}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				var n CallNode
				ctx := d.Start(context.Background(), &n)
				if (g+i)%50 == 0 {
					<-ctx.Done() // a late call
					if !errors.Is(context.Cause(ctx), ErrBrokerTimeout) {
						t.Errorf("late call canceled with %v", context.Cause(ctx))
					}
				} else if ctx.Err() != nil {
					t.Errorf("call canceled at once: %v", context.Cause(ctx))
				}
				d.Finish(&n)
			}
		})
	}
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.head != nil || d.tail != nil {
		t.Error("calls left listed")
	}
}
