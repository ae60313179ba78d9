//go:build mutation_drop_inventory_write

package mutation

// DropInventoryWrite is on: the record of a provision's or bind's success is not written.
const DropInventoryWrite = true
