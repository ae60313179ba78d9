// Package gctune keeps the Go garbage collector from collecting a small
// heap over and over: a Tuner raises the GC percent after every cycle so
// that the next heap goal is at least a floor, and leaves it at the base
// percent once the live heap's own goal is above the floor. It also reads
// the memory limit of the process's cgroup, for a soft memory limit below
// it.
//
// The GC percent and the memory limit are process-wide: run one Tuner per
// process.
package gctune

import "math"

// MaxPercent caps the GC percent a Tuner sets, whatever the floor: with a
// live heap of almost nothing the floor's percent has no bound.
const MaxPercent = 10000

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC 100
// (defaultHeapMinimum in runtime/mgcpacer.go), which it scales with the
// percent: at percent P the goal is never below 4 MiB × P/100. Percent
// keeps that minimum at or below the floor.
const runtimeHeapMinimum = 4 << 20

// Heap is what the last GC cycle found, in bytes: Live, the heap it marked
// (/gc/heap/live:bytes), and Roots, the stacks and globals it scanned
// (/gc/scan/stack:bytes + /gc/scan/globals:bytes), which the runtime adds
// to the live heap when it grows it by the percent.
type Heap struct {
	Live, Roots uint64
}

// Goal returns the heap goal the runtime sets after a cycle that found h,
// at GC percent p (runtime/mgcpacer.go, gcControllerState.commit): the
// live heap plus p% of the live heap and the roots, and at least the heap
// minimum; MaxInt64 when p is negative (GC off).
func Goal(h Heap, p int) uint64 {
	if p < 0 {
		return math.MaxInt64
	}
	goal := h.Live + (h.Live+h.Roots)*uint64(p)/100
	return max(goal, runtimeHeapMinimum*uint64(p)/100)
}

// Percent returns the GC percent that puts the heap goal after a cycle that
// found h at max(floor, the goal at base): base when its goal reaches the
// floor, else the largest percent whose goal (Goal) does not pass the
// floor, at most MaxPercent. A floor of 0 or less, or a negative base (GC
// off), returns base.
func Percent(floor int64, base int, h Heap) int {
	if floor <= 0 || base < 0 || Goal(h, base) >= uint64(floor) {
		return base
	}
	p := min(float64(MaxPercent), float64(floor)*100/runtimeHeapMinimum)
	if grown := h.Live + h.Roots; grown > 0 {
		p = min(p, float64(uint64(floor)-h.Live)*100/float64(grown))
	}
	return max(base, int(p))
}

// changeThreshold is the relative change, in percent, below which a Tuner
// leaves the GC percent as it is.
const changeThreshold = 5

// worthSetting reports whether a Tuner at percent cur should set next:
// when next differs from cur by more than changeThreshold percent of cur,
// or next is base (the GC then runs exactly at base).
func worthSetting(cur, next, base int) bool {
	switch {
	case next == cur:
		return false
	case next == base:
		return true
	}
	d := next - cur
	if d < 0 {
		d = -d
	}
	return d*100 > cur*changeThreshold
}
