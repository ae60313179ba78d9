package samplebroker

import "slices"

// Holdings is what the broker holds at one moment: every instance and
// binding that exists or is being created, as the fault table's checkers
// compare it with what the platform was told and what the gateway tracks.
type Holdings struct {
	// Instances are the ids of the instances that are live or whose
	// provision is still in progress, sorted.
	Instances []string `json:"instances"`
	// Bindings are "instance/binding" of the bindings that are live or
	// being created, of instances in Instances, sorted.
	Bindings []string `json:"bindings"`
}

// Holdings reports what the broker holds now (the broker's clock settles
// asynchronous operations that are due first). Safe for concurrent use.
func (b *Broker) Holdings() Holdings {
	now := b.now()
	var h Holdings
	for i := range b.store.shards {
		sh := &b.store.shards[i]
		sh.mu.Lock()
		for id := range sh.instances {
			in := sh.get(id, now)
			if !in.live && !(in.op.busy() && in.op.kind == opProvision) {
				continue
			}
			h.Instances = append(h.Instances, id)
			for bid, bd := range in.bindings {
				bd.settle(now)
				if bd.live || (bd.op.busy() && bd.op.kind == opBind) {
					h.Bindings = append(h.Bindings, id+"/"+bid)
				}
			}
		}
		sh.mu.Unlock()
	}
	slices.Sort(h.Instances)
	slices.Sort(h.Bindings)
	return h
}
