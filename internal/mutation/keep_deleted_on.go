//go:build mutation_keep_deleted

package mutation

// KeepDeleted is on: the inventory never forgets a deleted instance.
const KeepDeleted = true
