package main

import (
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"runtime/debug"
	"strconv"
	"sync"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/gctune"
)

// Where a runtime setting came from, as the start-up log line says.
const (
	fromGOGC       = "GOGC"
	fromGOMEMLIMIT = "GOMEMLIMIT"
)

// runtimeSettings are the GC percent, heap floor and memory limit decided
// from runtime.* and the environment, each with where it came from.
type runtimeSettings struct {
	floor       int64 // bytes; 0: no floor
	floorFrom   string
	percent     int // -1: GC off
	percentFrom string
	limit       int64 // bytes; math.MaxInt64: none
	limitFrom   string
}

// decideRuntime decides the settings of rc: GOGC in the environment wins
// over runtime.gc_percent and turns the floor off; GOMEMLIMIT wins over
// runtime.memory_limit, whose "auto" is 90% of the memory limit of the
// process's cgroup as found under root (the file system's root).
func decideRuntime(rc config.Runtime, lookupEnv func(string) (string, bool), root fs.FS) runtimeSettings {
	s := runtimeSettings{floor: rc.HeapFloorBytes(), floorFrom: "runtime.heap_floor",
		percent: rc.GCPercent, percentFrom: "runtime.gc_percent"}
	if v, set := lookupEnv("GOGC"); set {
		s.percent, s.percentFrom = parseGOGC(v), fromGOGC
		s.floor, s.floorFrom = 0, "off: GOGC is set"
	}
	if v, set := lookupEnv("GOMEMLIMIT"); set {
		s.limit, s.limitFrom = parseGOMEMLIMIT(v), fromGOMEMLIMIT
		return s
	}
	switch n, isSize := rc.MemoryLimitBytes(); {
	case isSize:
		s.limit, s.limitFrom = n, "runtime.memory_limit"
	case rc.MemoryLimit == config.MemoryLimitOff:
		s.limit, s.limitFrom = math.MaxInt64, "none: runtime.memory_limit is off"
	default: // auto
		cg := gctune.CgroupMemoryLimit(root)
		if cg.Limit == 0 {
			s.limit, s.limitFrom = math.MaxInt64, "none: no cgroup memory limit"
			break
		}
		s.limit = cg.Limit / 10 * 9
		s.limitFrom = fmt.Sprintf("90%% of /%s (%s)", cg.File, formatBytes(cg.Limit))
	}
	return s
}

// parseGOGC reads GOGC as the runtime does: "off" is -1, a number is
// itself, anything else 100.
func parseGOGC(v string) int {
	if v == "off" {
		return -1
	}
	if n, err := strconv.ParseInt(v, 10, 32); err == nil {
		return int(n)
	}
	return 100
}

// parseGOMEMLIMIT reads GOMEMLIMIT, whose syntax is config.ParseSize's
// plus "off"; "off", or what it cannot read (the runtime refuses to start
// on it), is no limit.
func parseGOMEMLIMIT(v string) int64 {
	if n, ok := config.ParseSize(v); ok {
		return n
	}
	return math.MaxInt64
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	if n == math.MaxInt64 {
		return "none"
	}
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatInt(n, 10) + "B"
}

// attrs are the settings as log attributes; percentNow is the GC percent
// set at the moment (the heap floor's while the heap is small).
func (s runtimeSettings) attrs(percentNow int) []any {
	floor := "off"
	if s.floor > 0 {
		floor = formatBytes(s.floor)
	}
	return []any{slog.String("heap_floor", floor), slog.String("heap_floor_from", s.floorFrom),
		slog.Int("gc_percent", s.percent), slog.String("gc_percent_from", s.percentFrom),
		slog.Int("gc_percent_now", percentNow),
		slog.String("memory_limit", formatBytes(s.limit)), slog.String("memory_limit_from", s.limitFrom)}
}

// runtimePolicy applies runtime.* to the process: the GC percent (through
// a gctune.Tuner while there is a heap floor) and the memory limit. Its
// methods are safe for concurrent use; a nil *runtimePolicy does nothing.
type runtimePolicy struct {
	mu        sync.Mutex
	lookupEnv func(string) (string, bool)
	root      fs.FS
	log       *slog.Logger
	tuner     *gctune.Tuner // nil without a floor
	applied   runtimeSettings
	// The process's settings before startRuntime, set again by stop.
	prevPercent int
	prevLimit   int64
	stopped     bool
}

// startRuntime applies rc and logs the settings in force, once.
func startRuntime(rc config.Runtime, lookupEnv func(string) (string, bool), root fs.FS, log *slog.Logger) *runtimePolicy {
	p := &runtimePolicy{lookupEnv: lookupEnv, root: root, log: log,
		prevPercent: gctune.GCPercent(), prevLimit: debug.SetMemoryLimit(-1)}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.apply(rc)
	log.Info("runtime", p.applied.attrs(gctune.GCPercent())...)
	return p
}

// reload applies rc, and logs the settings when they changed.
func (p *runtimePolicy) reload(rc config.Runtime) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	old := p.applied
	p.apply(rc)
	if p.applied != old {
		p.log.Info("runtime settings changed", p.applied.attrs(gctune.GCPercent())...)
	}
}

// apply sets what decideRuntime decides, leaving alone what the
// environment set (under mu).
func (p *runtimePolicy) apply(rc config.Runtime) {
	s := decideRuntime(rc, p.lookupEnv, p.root)
	if s.percentFrom != fromGOGC {
		switch {
		case s.floor > 0 && p.tuner == nil:
			p.tuner = gctune.Start(s.floor, s.percent)
		case s.floor > 0:
			p.tuner.Set(s.floor, s.percent)
		default:
			if p.tuner != nil {
				p.tuner.Stop()
				p.tuner = nil
			}
			debug.SetGCPercent(s.percent)
		}
	}
	if s.limitFrom != fromGOMEMLIMIT {
		debug.SetMemoryLimit(s.limit)
	}
	p.applied = s
}

// stop stops the tuner and sets the GC percent and memory limit back to
// what they were before startRuntime; reload does nothing after it.
func (p *runtimePolicy) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	if p.tuner != nil {
		p.tuner.Stop()
		p.tuner = nil
	}
	debug.SetGCPercent(p.prevPercent)
	debug.SetMemoryLimit(p.prevLimit)
}
