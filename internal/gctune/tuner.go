package gctune

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The runtime/metrics samples a Tuner reads after each cycle.
const (
	metricLive    = "/gc/heap/live:bytes"
	metricStack   = "/gc/scan/stack:bytes"
	metricGlobals = "/gc/scan/globals:bytes"
	metricPercent = "/gc/gogc:percent"
)

// A Tuner sets the GC percent after every GC cycle so that the next heap
// goal is max(floor, the goal at the base percent) (see Percent). It hears
// of each cycle through a cleanup (runtime.AddCleanup) on a sentinel object
// that the cleanup replaces with a new one: the runtime runs it on its own
// goroutine once a cycle found the sentinel unreachable. A Tuner's methods
// are safe for concurrent use; one Tuner per process (the GC percent is
// the process's).
type Tuner struct {
	mu      sync.Mutex
	floor   int64
	base    int
	percent int // the GC percent set last
	prev    int // the GC percent before Start, set again by Stop
	stopped bool
	cleanup runtime.Cleanup // on the current sentinel
	samples []metrics.Sample
	tunes   int // cycles seen (tests)
	// setPercent is debug.SetGCPercent.
	setPercent func(int) int
}

// sentinel is the object whose collection tells a Tuner that a cycle ran.
// It holds a pointer, so that the runtime's tiny allocator (pointer-free
// objects under 16 bytes share a slot) cannot keep it alive with a
// neighbour.
type sentinel struct {
	_ *sentinel
	_ uint64
}

// Start sets the GC percent for a heap floor of floor bytes over base
// (Percent, from the last cycle's heap), and again after every cycle until
// Stop. A floor of 0 or less keeps the percent at base.
func Start(floor int64, base int) *Tuner {
	t := &Tuner{floor: floor, base: base, setPercent: debug.SetGCPercent, samples: []metrics.Sample{
		{Name: metricLive}, {Name: metricStack}, {Name: metricGlobals}}}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.percent = Percent(floor, base, t.heap())
	t.prev = t.setPercent(t.percent)
	t.arm()
	return t
}

// arm attaches the cleanup that calls afterGC to a new sentinel (under mu).
func (t *Tuner) arm() {
	t.cleanup = runtime.AddCleanup(new(sentinel), (*Tuner).afterGC, t)
}

// afterGC runs once a cycle collected the sentinel: it tunes and arms a new
// sentinel, unless the Tuner was stopped.
func (t *Tuner) afterGC() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.tunes++
	t.tune(false)
	t.arm()
}

// tune sets the percent for the last cycle's heap, when it is worth the
// change or force is set (under mu).
func (t *Tuner) tune(force bool) {
	next := Percent(t.floor, t.base, t.heap())
	if next != t.percent && (force || worthSetting(t.percent, next, t.base)) {
		t.setPercent(next)
		t.percent = next
	}
}

// heap reads the last cycle's live heap and roots (under mu).
func (t *Tuner) heap() Heap {
	metrics.Read(t.samples)
	u := func(i int) uint64 {
		if t.samples[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not in this Go version: unreachable with the go.mod's
		}
		return t.samples[i].Value.Uint64()
	}
	return Heap{Live: u(0), Roots: u(1) + u(2)}
}

// Set changes the floor and the base percent (a configuration reload) and
// tunes at once. It does nothing after Stop.
func (t *Tuner) Set(floor int64, base int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.floor, t.base = floor, base
	t.tune(true)
}

// Percent returns the GC percent the Tuner set last.
func (t *Tuner) Percent() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent
}

// Stop cancels the cleanup, so that no call of the Tuner's runs after
// Stop returns (a cleanup already queued finds the Tuner stopped and does
// nothing), and sets the GC percent back to what it was before Start.
// Later calls do nothing.
func (t *Tuner) Stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	t.cleanup.Stop()
	t.setPercent(t.prev)
	t.percent = t.prev
}

// GCPercent returns the process's GC percent (/gc/gogc:percent), -1 when
// the GC is off, without changing it.
func GCPercent() int {
	s := []metrics.Sample{{Name: metricPercent}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return -1
	}
	v := s[0].Value.Uint64()
	if v > math.MaxInt32 {
		return -1 // GOGC=off: -1 as a uint64
	}
	return int(v)
}
