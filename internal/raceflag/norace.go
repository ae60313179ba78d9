//go:build !race

// Package raceflag tells tests whether the race detector is on: it
// changes allocation counts, so allocation budgets are checked without it.
package raceflag

// Enabled reports whether the race detector is on.
const Enabled = false
