package gctune

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// The tests here change the process's GC percent: none runs in parallel,
// and each sets it back (keepGCPercent).

// keepGCPercent sets the GC percent to p for the test and back afterwards.
func keepGCPercent(t *testing.T, p int) {
	t.Helper()
	orig := debug.SetGCPercent(p)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
}

// collectUntil runs GC cycles until cond holds, failing the test after a
// generous deadline; the Tuner hears of a cycle on the runtime's cleanup
// goroutine, after runtime.GC returns.
func collectUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still not %s after 20s of GC cycles (GC percent %d)", what, GCPercent())
		}
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
}

func heapGoal() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestTunerFollowsTheLiveHeap: with a small live heap the Tuner raises the
// GC percent so that the heap goal is the floor; a live heap whose goal at
// the base percent is above the floor gets the base percent after the next
// cycle; freed, the percent rises again; Stop sets back the percent from
// before Start and no cycle tunes after it.
func TestTunerFollowsTheLiveHeap(t *testing.T) {
	keepGCPercent(t, 123)
	const floor = 32 << 20
	runtime.GC()
	tn := Start(floor, 100)
	defer tn.Stop()
	if got := GCPercent(); got <= 400 || got != tn.Percent() {
		t.Fatalf("after Start: GC percent %d, the Tuner's %d; want the same, above 400 (the test's live heap is small)", got, tn.Percent())
	}
	if goal := heapGoal(); goal > floor+floor/20 || goal < floor-floor/10 {
		t.Errorf("heap goal %d, want about the floor %d", goal, floor)
	}

	ballast := make([]byte, 24<<20) // its goal at 100%: 48 MiB, above the floor
	collectUntil(t, "at the base percent with 24 MiB live", func() bool { return GCPercent() == 100 })
	if tn.Percent() != 100 {
		t.Errorf("Tuner's percent %d, want 100", tn.Percent())
	}
	runtime.KeepAlive(ballast) // unreachable from here
	collectUntil(t, "above 400 with the ballast freed", func() bool { return GCPercent() > 400 })

	tn.Stop()
	if got := GCPercent(); got != 123 {
		t.Errorf("after Stop: GC percent %d, want 123 (the value before Start)", got)
	}
	tn.mu.Lock()
	tunes := tn.tunes
	tn.mu.Unlock()
	for range 3 {
		runtime.GC()
	}
	tn.mu.Lock()
	defer tn.mu.Unlock()
	if tn.tunes != tunes || GCPercent() != 123 {
		t.Errorf("after Stop: %d more tunes, GC percent %d; want none, 123", tn.tunes-tunes, GCPercent())
	}
}

// TestTunerSet: a reload's floor and base take effect at once.
func TestTunerSet(t *testing.T) {
	keepGCPercent(t, 100)
	tn := Start(64<<20, 100)
	defer tn.Stop()
	tn.Set(0, 150)
	if got := GCPercent(); got != 150 || tn.Percent() != 150 {
		t.Errorf("floor off, base 150: GC percent %d, Tuner's %d; want 150", got, tn.Percent())
	}
	tn.Set(64<<20, 100)
	if got := GCPercent(); got <= 400 {
		t.Errorf("floor 64 MiB again: GC percent %d, want above 400", got)
	}
	tn.Stop()
	tn.Set(0, 300) // after Stop: nothing
	if got := GCPercent(); got != 100 {
		t.Errorf("Set after Stop: GC percent %d, want 100", got)
	}
}

func TestGCPercentOff(t *testing.T) {
	keepGCPercent(t, -1)
	if got := GCPercent(); got != -1 {
		t.Errorf("GCPercent with the GC off = %d, want -1", got)
	}
}
