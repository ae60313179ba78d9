package protect

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestQueueRoundRobin checks the turns on the queue itself: three tenants,
// one leaving the queue (its platform hung up) while it has the next turn.
func TestQueueRoundRobin(t *testing.T) {
	q := NewQueue(1, time.Minute)
	if !q.TryAcquire() {
		t.Fatal("an empty queue has no free slot")
	}
	served := make(chan string, 16)
	cancels := map[string]context.CancelFunc{}
	enqueue := func(tenant, name string) {
		ctx, cancel := context.WithCancel(t.Context())
		cancels[name] = cancel
		_, before := q.Counts()
		go func() {
			if _, err := q.Wait(ctx, tenant); err == nil {
				served <- name
			} else {
				served <- name + " left"
			}
		}()
		waitFor(t, func() bool { _, n := q.Counts(); return n == before+1 })
	}
	enqueue("a", "a1")
	enqueue("a", "a2")
	enqueue("b", "b1")
	enqueue("c", "c1")
	enqueue("b", "b2")
	var got []string
	next := func() {
		q.Release()
		got = append(got, <-served)
	}
	next()          // a1; b has the next turn
	cancels["b1"]() // b1 leaves: b keeps its turn with b2
	got = append(got, <-served)
	next() // b2
	next() // c1
	next() // a2
	q.Release()
	want := []string{"a1", "b1 left", "b2", "c1", "a2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("turns (-want +got):\n%s", diff)
	}
	if in, n := q.Counts(); in != 0 || n != 0 || len(q.ring) != 0 {
		t.Errorf("afterwards: %d in flight, %d queued, %d lines in the ring", in, n, len(q.ring))
	}
}

// waitFor waits up to 5s for cond.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
