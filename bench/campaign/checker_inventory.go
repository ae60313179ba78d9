package main

// Rule (h): what each broker holds is what the gateways' inventory
// records. The inventory records what the platform saw succeed, written
// under the operation's lock before the answer leaves, and removes what
// it saw deleted (docs/state.md; docs/legacy-brokers.md#the-inventory).
// Its one documented lag: a replica whose record the state store did not
// take writes it from its retry queue once the store is back, so the
// record may lag by up to the store's outage plus 5 s of retry backoff
// (docs/legacy-brokers.md#fetch-safe-repeats-and-gone). The campaign
// reads the views only once that lag is over for every store fault
// (inventoryCaughtUp), so after the drain the two must agree:
//
//   - a resource at a broker is recorded, or named by the orphan queue (a
//     create whose success no platform got is an orphan, not a record);
//     one no platform holds is (b)'s, one a platform holds is (h)'s;
//   - a record that stands for a resource (recordedOp.exists) is at its
//     broker, unless the last deletion of it ended in doubt for its
//     platform (no answer, a 5xx, a poll given up: a deletion the
//     platform did not see succeed leaves the record whole).
//
// The broker's own false success (a 2xx to a deletion under an injected
// garbage body, brokerLied) is noted, not counted.

import (
	"fmt"
	"strings"
	"time"
)

// inventoryCaughtUp is when the inventory has caught up with every store
// fault: the latest end of one plus its length plus 5 s of retry backoff.
func inventoryCaughtUp(faults []*fault, store string) time.Time {
	var t time.Time
	for _, f := range faults {
		if f.Target != store && f.Kind != fStoreCut {
			continue
		}
		if from, to, ok := window(f); ok {
			if u := to.Add(to.Sub(from) + retryBackoff); u.After(t) {
				t = u
			}
		}
	}
	return t
}

// retryBackoff is the documented 5 s of the retry queue's backoff.
const retryBackoff = 5 * time.Second

func (v *verdict) checkInventory() {
	for _, name := range sortedKeys(v.brokers) {
		b := v.brokers[name]
		for _, set := range []map[string]bool{b.instances, b.bindings} {
			for _, k := range sortedKeys(set) {
				_, held := v.held[k]
				if !held || v.gw.inventory[name+" "+k] || v.gw.orphans[name+" "+k] || v.brokerLied(name, k) != nil {
					continue // not held: (b)'s
				}
				t := v.lastOpOn(instanceOf(k))
				v.add("h", fmt.Sprintf("%s %s: a platform holds it and the broker too, and the inventory does not record it (nor the orphan queue)", name, k),
					instanceOf(k), t, t)
			}
		}
	}
	for _, key := range sortedKeys(v.gw.inventory) {
		if !v.gw.inventory[key] {
			continue // a create in progress or failed: no resource
		}
		name, k, _ := strings.Cut(key, " ")
		b := v.brokers[name]
		if b == nil || b.instances[k] || b.bindings[k] {
			continue
		}
		if strings.Contains(k, "/") && !b.instances[instanceOf(k)] && v.gw.inventory[name+" "+instanceOf(k)] {
			continue // its instance's record, gone from the broker too, is the one counted
		}
		if d := v.lastDeletion(name, k); d != nil && !d.succeeded(v.ops) {
			v.notes = append(v.notes, fmt.Sprintf("%s %s: recorded, not at the broker, and its last deletion ended in doubt (%s)", name, k, d))
			continue
		}
		t := v.lastOpOn(instanceOf(k))
		v.add("h", fmt.Sprintf("%s %s: the inventory records it and the broker does not hold it", name, k), instanceOf(k), t, t)
	}
}

// lastDeletion is the last deprovision or unbind a platform sent of k.
func (v *verdict) lastDeletion(broker, k string) *op {
	instance, binding, _ := strings.Cut(k, "/")
	var last *op
	for _, o := range v.ops {
		if o.Broker == broker && o.Instance == instance && o.Binding == binding &&
			(o.Kind == "deprovision" || o.Kind == "unbind") && (last == nil || o.Start.After(last.Start)) {
			last = o
		}
	}
	return last
}

// succeeded reports whether the platform saw the deletion o succeed: 200,
// 410, or a 202 one of whose polls said succeeded or 410.
func (o *op) succeeded(ops []*op) bool {
	switch o.Status {
	case 200, 410:
		return true
	case 202:
		for _, p := range ops {
			if p.Of == o.ID && (p.State == "succeeded" || p.Status == 410) {
				return true
			}
		}
	}
	return false
}

// abandoned is the create of k (at broker) by a platform that does not
// mitigate orphans, when that platform never learnt its outcome (no
// answer, or a 202 it did not poll to the end) and the inventory records
// k: the gateway delivered the success (its write went out before the
// platform went away), and the record names what the broker made. Nil
// otherwise.
func (v *verdict) abandoned(broker, k string) *op {
	if !v.gw.inventory[broker+" "+k] {
		return nil
	}
	instance, binding, _ := strings.Cut(k, "/")
	var last *op
	for _, o := range v.ops {
		if o.Broker == broker && o.Instance == instance && o.Binding == binding && (o.Kind == "provision" || o.Kind == "bind") {
			last = o
		}
	}
	if last == nil || v.careless[last.Platform] == "" || (last.Status != 0 && last.Status != 202) {
		return nil
	}
	return last
}
