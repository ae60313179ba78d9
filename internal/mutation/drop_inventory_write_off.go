//go:build !mutation_drop_inventory_write

package mutation

// DropInventoryWrite is off (see All): the gateway keeps the promise.
const DropInventoryWrite = false
