//go:build !unix

package lean

import "time"

// processCPU is unknown here: benchmarks report no CPU time.
func processCPU() time.Duration { return 0 }
