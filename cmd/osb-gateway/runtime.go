package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// applyRuntime sets the GC target and memory limit from the configuration,
// unless the GOGC and GOMEMLIMIT environment variables are set (they win).
// Without runtime.memory_limit, a process in a container whose cgroup caps
// its memory gets a soft limit of 90% of that cap, so that it collects
// harder near the cap instead of being killed; "off" sets none.
func applyRuntime(rc config.Runtime, log *slog.Logger) error {
	if _, set := os.LookupEnv("GOGC"); !set && rc.GOGC > 0 {
		debug.SetGCPercent(rc.GOGC)
	}
	limit, from := "", "none"
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		limit, from = os.Getenv("GOMEMLIMIT"), "GOMEMLIMIT"
	} else {
		switch rc.MemoryLimit {
		case "off":
		case "":
			if n, ok := cgroupMemoryLimit(cgroupRoot); ok {
				n = n / 10 * 9
				debug.SetMemoryLimit(n)
				limit, from = strconv.FormatInt(n, 10)+"B", "90% of the cgroup's memory limit"
			}
		default:
			n, err := parseBytes(rc.MemoryLimit)
			if err != nil {
				return fmt.Errorf("runtime.memory_limit: %w", err)
			}
			debug.SetMemoryLimit(n)
			limit, from = rc.MemoryLimit, "runtime.memory_limit"
		}
	}
	log.Info("runtime", slog.Int("gogc", gcPercent(rc)), slog.String("memory_limit", limit),
		slog.String("memory_limit_from", from))
	return nil
}

// gcPercent is the GC target in effect after applyRuntime: GOGC's when
// set (the runtime read it at start; -1 is off), else runtime.gogc.
func gcPercent(rc config.Runtime) int {
	if v, set := os.LookupEnv("GOGC"); set {
		if v == "off" {
			return -1
		}
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		return 100
	}
	return rc.GOGC
}

// cgroupRoot is where the process's cgroup files are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupMemoryLimit returns the memory limit of the process's cgroup under
// root: cgroup v2's memory.max, or v1's memory/memory.limit_in_bytes. It
// reports false when there is none ("max", v1's near-2^63 "unlimited", or
// no such file).
func cgroupMemoryLimit(root string) (int64, bool) {
	for _, name := range []string{"memory.max", "memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			continue
		}
		v := strings.TrimSpace(string(b))
		if v == "max" {
			return 0, false
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 { // v1 says unlimited with 2^63 rounded to a page
			return 0, false
		}
		return n, true
	}
	return 0, false
}

// parseBytes parses a size in GOMEMLIMIT syntax: a number with an optional
// B, KiB, MiB, GiB or TiB suffix.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	mult := int64(1)
	num := s
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n <= 0 || n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q is not a size such as 512MiB or 2GiB", s)
	}
	return n * mult, nil
}
