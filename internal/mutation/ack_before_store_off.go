//go:build !mutation_ack_before_store

package mutation

// AckBeforeStore is off (see All): the gateway keeps the promise.
const AckBeforeStore = false
