//go:build race

package audit

// raceEnabled reports whether the race detector is on; it changes
// allocation counts.
const raceEnabled = true
