package main

import (
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/gctune"
)

// cgroupV2 is a container's file system with a 1 GiB cgroup v2 limit.
var cgroupV2 = fstest.MapFS{
	"proc/self/cgroup":         {Data: []byte("0::/\n")},
	"sys/fs/cgroup/memory.max": {Data: []byte("1073741824\n")},
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// defaultRuntime is runtime.* with every default.
func defaultRuntime() config.Runtime {
	return config.Runtime{HeapFloor: config.DefaultHeapFloor, GCPercent: config.DefaultGCPercent,
		MemoryLimit: config.DefaultMemoryLimit}
}

func TestDecideRuntime(t *testing.T) {
	with := func(edit func(*config.Runtime)) config.Runtime {
		rc := defaultRuntime()
		edit(&rc)
		return rc
	}
	none := fstest.MapFS{}
	for _, tc := range []struct {
		name string
		rc   config.Runtime
		env  map[string]string
		root fstest.MapFS
		want runtimeSettings
	}{
		{"defaults in a container", defaultRuntime(), nil, cgroupV2, runtimeSettings{
			floor: 64 << 20, floorFrom: "runtime.heap_floor", percent: 100, percentFrom: "runtime.gc_percent",
			limit: (1 << 30) / 10 * 9, limitFrom: "90% of /sys/fs/cgroup/memory.max (1GiB)"}},
		{"defaults without a cgroup limit", defaultRuntime(), nil, none, runtimeSettings{
			floor: 64 << 20, floorFrom: "runtime.heap_floor", percent: 100, percentFrom: "runtime.gc_percent",
			limit: math.MaxInt64, limitFrom: "none: no cgroup memory limit"}},
		{"configured", with(func(r *config.Runtime) { r.HeapFloor, r.GCPercent, r.MemoryLimit = "0", 200, "512MiB" }), nil, cgroupV2,
			runtimeSettings{floorFrom: "runtime.heap_floor", percent: 200, percentFrom: "runtime.gc_percent",
				limit: 512 << 20, limitFrom: "runtime.memory_limit"}},
		{"memory limit off", with(func(r *config.Runtime) { r.MemoryLimit = "off" }), nil, cgroupV2, runtimeSettings{
			floor: 64 << 20, floorFrom: "runtime.heap_floor", percent: 100, percentFrom: "runtime.gc_percent",
			limit: math.MaxInt64, limitFrom: "none: runtime.memory_limit is off"}},
		{"GOGC wins and turns the floor off", defaultRuntime(), map[string]string{"GOGC": "400"}, none, runtimeSettings{
			floorFrom: "off: GOGC is set", percent: 400, percentFrom: "GOGC",
			limit: math.MaxInt64, limitFrom: "none: no cgroup memory limit"}},
		{"GOGC off", defaultRuntime(), map[string]string{"GOGC": "off"}, none, runtimeSettings{
			floorFrom: "off: GOGC is set", percent: -1, percentFrom: "GOGC",
			limit: math.MaxInt64, limitFrom: "none: no cgroup memory limit"}},
		{"GOMEMLIMIT wins over the cgroup", defaultRuntime(), map[string]string{"GOMEMLIMIT": "700MiB"}, cgroupV2, runtimeSettings{
			floor: 64 << 20, floorFrom: "runtime.heap_floor", percent: 100, percentFrom: "runtime.gc_percent",
			limit: 700 << 20, limitFrom: "GOMEMLIMIT"}},
		{"GOMEMLIMIT wins over a size", with(func(r *config.Runtime) { r.MemoryLimit = "512MiB" }), map[string]string{"GOMEMLIMIT": "off"}, none,
			runtimeSettings{floor: 64 << 20, floorFrom: "runtime.heap_floor", percent: 100, percentFrom: "runtime.gc_percent",
				limit: math.MaxInt64, limitFrom: "GOMEMLIMIT"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideRuntime(tc.rc, envOf(tc.env), tc.root)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(runtimeSettings{})); diff != "" {
				t.Errorf("decideRuntime (-want +got):\n%s", diff)
			}
		})
	}
}

// keepRuntime sets the GC percent and memory limit back after the test.
func keepRuntime(t *testing.T) {
	t.Helper()
	percent, limit := debug.SetGCPercent(100), debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
}

// TestRuntimePolicy: serve applies the floor and the memory limit, a
// reload changes them, and stop sets back what the process had.
func TestRuntimePolicy(t *testing.T) {
	keepRuntime(t)
	debug.SetGCPercent(123)
	debug.SetMemoryLimit(3 << 30)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := startRuntime(defaultRuntime(), envOf(nil), cgroupV2, log)
	if got := gctune.GCPercent(); got <= 100 {
		t.Errorf("at start: GC percent %d, want above 100 (the floor's, with a small heap)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != (1<<30)/10*9 {
		t.Errorf("at start: memory limit %d, want 90%% of 1GiB", got)
	}
	rc := defaultRuntime()
	rc.HeapFloor, rc.GCPercent, rc.MemoryLimit = "0", 150, "off"
	p.reload(rc)
	if got, limit := gctune.GCPercent(), debug.SetMemoryLimit(-1); got != 150 || limit != math.MaxInt64 {
		t.Errorf("reloaded without a floor: GC percent %d, memory limit %d; want 150, none", got, limit)
	}
	p.reload(defaultRuntime())
	if got := gctune.GCPercent(); got <= 100 {
		t.Errorf("reloaded with the floor: GC percent %d, want above 100", got)
	}
	p.stop()
	if got, limit := gctune.GCPercent(), debug.SetMemoryLimit(-1); got != 123 || limit != 3<<30 {
		t.Errorf("after stop: GC percent %d, memory limit %d; want 123, 3GiB (as before start)", got, limit)
	}
	p.reload(rc)
	if got := gctune.GCPercent(); got != 123 {
		t.Errorf("reload after stop: GC percent %d, want 123", got)
	}
}

// TestRuntimePolicyLeavesTheEnvironment: with GOGC and GOMEMLIMIT set,
// neither the percent nor the limit moves, and no floor is kept.
func TestRuntimePolicyLeavesTheEnvironment(t *testing.T) {
	keepRuntime(t)
	debug.SetGCPercent(77)
	debug.SetMemoryLimit(2 << 30)
	p := startRuntime(defaultRuntime(), envOf(map[string]string{"GOGC": "77", "GOMEMLIMIT": "2GiB"}), cgroupV2,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer p.stop()
	if got, limit := gctune.GCPercent(), debug.SetMemoryLimit(-1); got != 77 || limit != 2<<30 || p.tuner != nil {
		t.Errorf("GC percent %d, memory limit %d, tuner %v; want 77, 2GiB, none", got, limit, p.tuner)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1000: "1000B", 1 << 10: "1KiB", 64 << 20: "64MiB", 3 << 30: "3GiB",
		(1 << 30) / 10 * 9: "966367638B", math.MaxInt64: "none"} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestReloadAppliesRuntime: a reload of a file with another runtime
// section changes the GC percent and the memory limit at once.
func TestReloadAppliesRuntime(t *testing.T) {
	keepRuntime(t)
	broker := named("b")
	defer broker.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeConfig(t, path, broker.URL, "first")
	s := startServer(t, path)
	s.runtime = startRuntime(defaultRuntime(), envOf(nil), fstest.MapFS{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(s.runtime.stop)
	if got := gctune.GCPercent(); got <= 100 {
		t.Fatalf("at start: GC percent %d, want above 100 (the floor's)", got)
	}
	writeConfig(t, path, broker.URL, "first")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteString("runtime: {heap_floor: 0, gc_percent: 150, memory_limit: 256MiB}\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if got, limit := gctune.GCPercent(), debug.SetMemoryLimit(-1); got != 150 || limit != 256<<20 {
		t.Errorf("after reload: GC percent %d, memory limit %d; want 150, 256MiB", got, limit)
	}
}
