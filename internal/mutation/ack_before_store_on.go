//go:build mutation_ack_before_store

package mutation

// AckBeforeStore is on: the platform gets its answer before the inventory write.
const AckBeforeStore = true
