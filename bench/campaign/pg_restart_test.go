package main

import (
	"testing"
	"time"
)

// TestPgRestartsLeaveTheSeedsSchedule: -store postgres adds its restarts
// to a seed's schedule, about one a minute, drawn apart from the other
// faults, which stay as they were; -store-failover, and other stores, get
// none; -skip postgres-restart takes them out again.
func TestPgRestartsLeaveTheSeedsSchedule(t *testing.T) {
	const d = 3 * time.Minute
	base := planAll(3, d, "postgres", 2, 4, []string{"modern", "legacy"}, 2500*time.Millisecond)
	kinds := func(fs []*fault) (restarts int, others []string) {
		for _, f := range fs {
			if f.Kind == fPgRestart {
				restarts++
				if f.For < 200*time.Millisecond || f.For > 2*time.Second || f.At < 30*time.Second || f.At >= d {
					t.Errorf("restart %+v: want For 0.2–2 s, at +30 s to +%s", f, d)
				}
				continue
			}
			others = append(others, f.Kind+"@"+f.At.String())
		}
		return restarts, others
	}
	_, want := kinds(base)
	n, got := kinds(withPgRestarts(base, 3, d, "postgres", storeOpts{}))
	if n < 2 || n > 3 {
		t.Errorf("%d restarts in %s, want 2 or 3", n, d)
	}
	if len(got) != len(want) {
		t.Fatalf("the other faults changed: %d, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("fault %d is %s, want %s", i, got[i], want[i])
		}
	}
	if n, _ := kinds(withPgRestarts(base, 3, d, "postgres", storeOpts{failover: true, every: 45 * time.Second})); n != 0 {
		t.Errorf("%d restarts with -store-failover, want 0", n)
	}
	if n, _ := kinds(withPgRestarts(base, 3, d, "redis", storeOpts{})); n != 0 {
		t.Errorf("%d restarts on redis, want 0", n)
	}
	if n, _ := kinds(skipKinds(withPgRestarts(base, 3, d, "postgres", storeOpts{}), fPgRestart)); n != 0 {
		t.Errorf("%d restarts with -skip %s, want 0", n, fPgRestart)
	}
}
