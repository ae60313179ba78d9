//go:build !mutation_lock_free

package mutation

// LockFree is off (see All): the gateway keeps the promise.
const LockFree = false
