//go:build race

package proxy

// raceEnabled reports whether the race detector is on. It changes the
// allocation counts of a proxied call (sync.Pool drops items at random
// under -race, and net/http and the reverse proxy pool their buffers), so
// TestProxiedGETAllocationBudget checks its budget only without it.
const raceEnabled = true
