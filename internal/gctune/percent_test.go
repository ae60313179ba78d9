package gctune

import "testing"

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		floor int64
		base  int
		heap  Heap
		want  int
	}{
		{"floor off", 0, 100, Heap{Live: 2 * mib}, 100},
		{"gc off", 64 * mib, -1, Heap{Live: 2 * mib}, -1},
		// Nothing marked yet: the runtime's heap minimum (4 MiB × P/100)
		// is the goal, and it stops at the floor.
		{"empty heap", 64 * mib, 100, Heap{}, 1600},
		{"empty heap, huge floor", 1 << 40, 100, Heap{}, MaxPercent},
		// 4 MiB live, 1 MiB of roots: 4 + 5 × 12 = 64.
		{"small heap", 64 * mib, 100, Heap{Live: 4 * mib, Roots: mib}, 1200},
		{"small heap, base above", 64 * mib, 2000, Heap{Live: 4 * mib, Roots: mib}, 2000},
		// 20 + 21 × 2.0952 = 64 (rounded down: the goal stays at or below the floor).
		{"middle", 64 * mib, 100, Heap{Live: 20 * mib, Roots: mib}, 209},
		// 31 + 32 × 1.03 = 63.96.
		{"just below", 64 * mib, 100, Heap{Live: 31 * mib, Roots: mib}, 103},
		// 32 + 32 × 1 = 64: the base's own goal reaches the floor.
		{"at the floor", 64 * mib, 100, Heap{Live: 32 * mib}, 100},
		{"large heap", 64 * mib, 100, Heap{Live: 1 << 30, Roots: mib}, 100},
		{"large heap, base 50", 64 * mib, 50, Heap{Live: 1 << 30}, 50},
		{"floor below the base's heap minimum", 2 * mib, 100, Heap{}, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Percent(tc.floor, tc.base, tc.heap)
			if got != tc.want {
				t.Fatalf("Percent(%d, %d, %+v) = %d, want %d", tc.floor, tc.base, tc.heap, got, tc.want)
			}
			if tc.floor > 0 && got > tc.base && Goal(tc.heap, got) > uint64(tc.floor) {
				t.Errorf("goal at %d is %d, above the floor %d", got, Goal(tc.heap, got), tc.floor)
			}
		})
	}
}

func TestWorthSetting(t *testing.T) {
	for _, tc := range []struct {
		name            string
		cur, next, base int
		want            bool
	}{
		{"same", 1600, 1600, 100, false},
		{"5% is not", 1600, 1520, 100, false},
		{"over 5% is", 1600, 1519, 100, true},
		{"up over 5%", 200, 211, 100, true},
		{"back to base, however close", 102, 100, 100, true},
		{"leaving base by 1%", 100, 101, 100, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := worthSetting(tc.cur, tc.next, tc.base); got != tc.want {
				t.Errorf("worthSetting(%d, %d, %d) = %v, want %v", tc.cur, tc.next, tc.base, got, tc.want)
			}
		})
	}
}
