// Package mutation breaks one of the gateway's promises on purpose, so
// that the fault campaign (bench/campaign -mutation) can show it catches
// the break. Each mutation is a constant, false unless the gateway is
// built with its tag (go build -tags mutation_lock_free ...), read at the
// one place the promise is kept: `if mutation.LockFree { ... }` is a
// compile-time constant, so a real build carries neither the branch nor
// its cost. Never build a gateway you run for anyone with a mutation tag.
package mutation

import "time"

// A Mutation is one broken promise: its name for -mutation and its build
// tag.
type Mutation struct {
	Name, Tag, Breaks string
	on                bool
}

// All is every mutation, with whether this build has it on.
var All = []Mutation{
	{"lock-free", "mutation_lock_free", "the guard never blocks: a lock held by another operation refuses nothing", LockFree},
	{"keep-deleted", "mutation_keep_deleted", "the inventory never forgets a deleted instance", KeepDeleted},
	{"no-orphans", "mutation_no_orphans", "the gateway never notes an orphan candidate", NoOrphans},
	{"drop-inventory-write", "mutation_drop_inventory_write", "the inventory record of a provision's or bind's success is not written", DropInventoryWrite},
	{"ack-before-store", "mutation_ack_before_store", "the platform gets its answer before the inventory write, which follows AckDelay later", AckBeforeStore},
}

// Active is the names of the mutations this build has on: none in a real
// build.
func Active() []string {
	var out []string
	for _, m := range All {
		if m.on {
			out = append(out, m.Name)
		}
	}
	return out
}

// AckDelay is how long after the answer ack-before-store writes what the
// answer settled: a write-behind store.
const AckDelay = 300 * time.Millisecond

// Later runs f AckDelay from now, in a goroutine of its own (for
// ack-before-store; unused in a real build).
func Later(f func()) { time.AfterFunc(AckDelay, f) }
