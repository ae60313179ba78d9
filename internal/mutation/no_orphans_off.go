//go:build !mutation_no_orphans

package mutation

// NoOrphans is off (see All): the gateway keeps the promise.
const NoOrphans = false
