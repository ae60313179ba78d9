package samplebroker

import (
	"encoding/json"
	"strconv"
	"sync"
	"time"
)

// opKind is what an asynchronous operation does.
type opKind uint8

const (
	opProvision opKind = iota
	opUpdate
	opDeprovision
	opBind
	opUnbind
	numOpKinds
)

// opState is the state last_operation reports.
type opState uint8

const (
	stateInProgress opState = iota
	stateSucceeded
	stateFailed
	numOpStates
)

// operation is an asynchronous operation. Its outcome follows from the clock:
// in progress until due, then succeeded (or failed when fail is set).
type operation struct {
	kind    opKind
	id      string    // the "operation" string handed to the platform
	due     time.Time // when it stops being in progress
	fail    bool      // ends in state failed
	settled bool      // its effect has been applied
	// For updates: what the instance becomes when the update succeeds.
	plan   *planDef
	params []byte
}

// state reports the operation's state at now.
func (o *operation) state(now time.Time) opState {
	switch {
	case now.Before(o.due):
		return stateInProgress
	case o.fail:
		return stateFailed
	}
	return stateSucceeded
}

// instance is one service instance, including the record of a provision
// that failed or a deletion that finished asynchronously (kept so that
// last_operation can still answer).
type instance struct {
	plan       *planDef
	org, space string
	params     []byte // canonical JSON object, or nil
	live       bool   // provisioned and not deleted
	deleted    bool   // an asynchronous deprovision finished
	op         *operation
	bindings   map[string]*binding
}

// binding is one service binding, with the same record-keeping as instance.
type binding struct {
	appGUID string
	params  []byte
	creds   json.RawMessage
	live    bool
	deleted bool
	op      *operation
}

// busy reports whether an asynchronous operation is still in progress. The
// caller has settled the record.
func (o *operation) busy() bool { return o != nil && !o.settled }

// settle applies the effect of a finished asynchronous operation, once.
func (in *instance) settle(now time.Time) {
	o := in.op
	if o == nil || o.settled || now.Before(o.due) {
		return
	}
	o.settled = true
	if o.fail {
		return
	}
	switch o.kind {
	case opProvision:
		in.live = true
	case opUpdate:
		in.plan, in.params = o.plan, o.params
		o.plan, o.params = nil, nil
	case opDeprovision:
		in.live, in.deleted, in.bindings = false, true, nil
	}
}

// settle applies the effect of a finished asynchronous binding operation.
func (bd *binding) settle(now time.Time) {
	o := bd.op
	if o == nil || o.settled || now.Before(o.due) {
		return
	}
	o.settled = true
	if o.fail {
		return
	}
	switch o.kind {
	case opBind:
		bd.live = true
	case opUnbind:
		bd.live, bd.deleted, bd.creds = false, true, nil
	}
}

// numShards spreads instances over independently locked maps so that
// concurrent requests for different instances rarely contend.
const numShards = 64

// shard is one lock and the instances it guards, bindings included.
type shard struct {
	mu        sync.Mutex
	instances map[string]*instance
}

// store holds every instance.
type store struct {
	shards [numShards]shard
}

func (s *store) init() {
	for i := range s.shards {
		s.shards[i].instances = make(map[string]*instance)
	}
}

// lock locks the shard of instanceID and returns it; the caller unlocks.
func (s *store) lock(instanceID string) *shard {
	// FNV-1a, inline so that it does not allocate.
	h := uint32(2166136261)
	for i := 0; i < len(instanceID); i++ {
		h ^= uint32(instanceID[i])
		h *= 16777619
	}
	sh := &s.shards[h%numShards]
	sh.mu.Lock()
	return sh
}

// get returns the settled instance, or nil. The shard is locked.
func (sh *shard) get(id string, now time.Time) *instance {
	in := sh.instances[id]
	if in != nil {
		in.settle(now)
	}
	return in
}

// newOperation starts an asynchronous operation at now.
func (b *Broker) newOperation(kind opKind, now time.Time, fail bool) *operation {
	seq := b.opSeq.Add(1)
	return &operation{
		kind: kind,
		id:   opNames[kind] + "-" + strconv.FormatUint(seq, 10),
		due:  now.Add(b.asyncDelay),
		fail: fail,
	}
}

var opNames = [numOpKinds]string{"provision", "update", "deprovision", "bind", "unbind"}

// lastOpBodies holds every last_operation response body, marshalled once.
type lastOpBodies [numOpKinds][numOpStates][]byte

// lastOpJSON is the last_operation response. InstanceUsable and
// UpdateRepeatable (OSB 2.16) accompany failed updates and deletions.
type lastOpJSON struct {
	State            string `json:"state"`
	Description      string `json:"description"`
	InstanceUsable   *bool  `json:"instance_usable,omitempty"`
	UpdateRepeatable *bool  `json:"update_repeatable,omitempty"`
}

func newLastOpBodies(legacy bool) lastOpBodies {
	states := [numOpStates]string{"in progress", "succeeded", "failed"}
	verbs := [numOpKinds]string{"Provisioning", "Updating", "Deprovisioning", "Binding", "Unbinding"}
	suffix := [numOpStates]string{" is in progress.", " succeeded.", " failed (injected fault)."}
	yes := true
	var t lastOpBodies
	for k := range numOpKinds {
		for s := range numOpStates {
			v := lastOpJSON{State: states[s], Description: verbs[k] + suffix[s]}
			if !legacy && s == stateFailed {
				switch k {
				case opUpdate:
					v.InstanceUsable, v.UpdateRepeatable = &yes, &yes
				case opDeprovision:
					v.InstanceUsable = &yes
				}
			}
			body, _ := json.Marshal(v)
			t[k][s] = append(body, '\n')
		}
	}
	return t
}

// noOperation is the last_operation body for a resource that was created or
// changed synchronously: nothing is in progress.
var noOperation = []byte(`{"state":"succeeded","description":"No asynchronous operation; the last one completed synchronously."}` + "\n")
