//go:build !mutation_keep_deleted

package mutation

// KeepDeleted is off (see All): the gateway keeps the promise.
const KeepDeleted = false
