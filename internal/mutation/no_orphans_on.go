//go:build mutation_no_orphans

package mutation

// NoOrphans is on: the gateway never notes an orphan candidate.
const NoOrphans = true
