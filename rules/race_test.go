//go:build race

package rules

// raceEnabled reports whether the race detector is on; it changes
// allocation counts.
const raceEnabled = true
