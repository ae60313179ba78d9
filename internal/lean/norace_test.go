//go:build !race

package lean

// raceEnabled reports whether the race detector is on (it changes
// allocation counts).
const raceEnabled = false
