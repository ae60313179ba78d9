package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// applyRuntime sets the GC target and memory limit from the configuration,
// unless the GOGC and GOMEMLIMIT environment variables are set (they win).
func applyRuntime(rc config.Runtime, log *slog.Logger) error {
	if _, set := os.LookupEnv("GOGC"); !set && rc.GOGC > 0 {
		debug.SetGCPercent(rc.GOGC)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && rc.MemoryLimit != "" {
		n, err := parseBytes(rc.MemoryLimit)
		if err != nil {
			return fmt.Errorf("runtime.memory_limit: %w", err)
		}
		debug.SetMemoryLimit(n)
	}
	log.Debug("runtime", slog.Int("gogc", rc.GOGC), slog.String("memory_limit", rc.MemoryLimit))
	return nil
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
