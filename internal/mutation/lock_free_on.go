//go:build mutation_lock_free

package mutation

// LockFree is on: the guard never blocks.
const LockFree = true
