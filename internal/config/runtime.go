package config

import "fmt"

// Defaults of the runtime section.
const (
	// DefaultHeapFloor is runtime.heap_floor: below it the GC does not
	// run. A gateway's live heap is a few MB (config, catalogs, pools), and
	// at GOGC 100 it spent about 12% of a proxied poll's CPU collecting it
	// (BenchmarkProxiedGET, last_operation: 36.7–40 µs against 32–34 µs
	// at GOGC 400); 64 MiB is what a GOGC of a few hundred gives such a
	// heap, and nothing once the live heap is large.
	DefaultHeapFloor = "64MiB"
	// DefaultGCPercent is runtime.gc_percent, the runtime's own default.
	DefaultGCPercent = 100
	// DefaultMemoryLimit is runtime.memory_limit.
	DefaultMemoryLimit = MemoryLimitAuto
)

// The words runtime.memory_limit takes besides a size.
const (
	// MemoryLimitAuto is 90% of the memory limit of the process's cgroup
	// (v2 or v1), when it has one; else no limit.
	MemoryLimitAuto = "auto"
	// MemoryLimitOff sets no memory limit.
	MemoryLimitOff = "off"
)

// Runtime is the Go runtime's memory policy, applied at start and on
// reload (cmd/osb-gateway, internal/gctune). The GOGC and GOMEMLIMIT
// environment variables, when set, win over it.
type Runtime struct {
	// HeapFloor is a heap size such as "64MiB" below which the GC does not
	// run: while the live heap is small, the GC percent is raised so that
	// the next heap goal is HeapFloor; once the live heap's own goal at
	// GCPercent is above it, the GC runs exactly at GCPercent. "0" turns
	// the floor off. Zero value: DefaultHeapFloor. GOGC in the environment
	// turns it off.
	HeapFloor string `yaml:"heap_floor"`
	// GCPercent is the GC target percentage (GOGC) above the floor; zero
	// value: DefaultGCPercent. GOGC in the environment wins.
	GCPercent int `yaml:"gc_percent" validate:"gte=10,lte=10000"`
	// MemoryLimit is the soft memory limit: MemoryLimitAuto, a size such
	// as "512MiB" (GOMEMLIMIT syntax) or MemoryLimitOff. Zero value:
	// DefaultMemoryLimit. GOMEMLIMIT in the environment wins.
	MemoryLimit string `yaml:"memory_limit"`
}

func (r *Runtime) applyDefaults() {
	if r.HeapFloor == "" {
		r.HeapFloor = DefaultHeapFloor
	}
	if r.GCPercent == 0 {
		r.GCPercent = DefaultGCPercent
	}
	if r.MemoryLimit == "" {
		r.MemoryLimit = DefaultMemoryLimit
	}
}

// HeapFloorBytes returns HeapFloor in bytes, 0 when off; valid after
// Parse.
func (r Runtime) HeapFloorBytes() int64 {
	n, _ := ParseSize(r.HeapFloor)
	return n
}

// MemoryLimitBytes returns MemoryLimit in bytes when it is a size; false
// for MemoryLimitAuto and MemoryLimitOff. Valid after Parse.
func (r Runtime) MemoryLimitBytes() (int64, bool) {
	return ParseSize(r.MemoryLimit)
}

// checkRuntime checks the sizes of the runtime section.
func checkRuntime(r Runtime, probs *Problems) {
	if _, ok := ParseSize(r.HeapFloor); !ok {
		probs.addf("runtime.heap_floor", `must be a size such as "64MiB" or "1GiB" (B, KiB, MiB, GiB, TiB), or 0 to turn the floor off; got %q`, r.HeapFloor)
	}
	switch r.MemoryLimit {
	case MemoryLimitAuto, MemoryLimitOff:
		return
	}
	n, ok := ParseSize(r.MemoryLimit)
	if !ok || n == 0 {
		probs.addf("runtime.memory_limit", `must be "auto" (90%% of the cgroup's memory limit), a size such as "512MiB" or "2GiB" (B, KiB, MiB, GiB, TiB), or "off"; got %q`, r.MemoryLimit)
	}
}

// runtimeWarnings returns what in a valid runtime section is likely a
// mistake: a floor the memory limit keeps the heap from reaching.
func runtimeWarnings(r Runtime) []string {
	floor := r.HeapFloorBytes()
	limit, ok := r.MemoryLimitBytes()
	if !ok || floor == 0 || floor < limit {
		return nil
	}
	return []string{fmt.Sprintf("runtime.heap_floor: %s is not below runtime.memory_limit %s: the memory limit, not the floor, decides when the GC runs while the heap is small",
		r.HeapFloor, r.MemoryLimit)}
}
