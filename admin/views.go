package admin

import (
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The admin answers' views of the store's records: every JSON field name
// in snake_case, as in the rest of the admin API, whatever the store's Go
// field names (store.Lock and store.Orphan carry no JSON tags: bolt and
// Redis keep their own record types).

// lockView is a lock or asynchronous operation as the admin routes show
// it. The trace context is left out.
type lockView struct {
	Key        string    `json:"key"`
	Owner      string    `json:"owner"`
	Kind       string    `json:"kind"`
	Tenant     string    `json:"tenant"`
	Broker     string    `json:"broker"`
	InstanceID string    `json:"instance_id"`
	BindingID  string    `json:"binding_id,omitempty"`
	ServiceID  string    `json:"service_id,omitempty"`
	PlanID     string    `json:"plan_id,omitempty"`
	Async      bool      `json:"async"`
	Operation  string    `json:"operation,omitempty"`
	Started    time.Time `json:"started"`
	Deadline   time.Time `json:"deadline"`
	// Shim is the operation the gateway emulates for a synchronous
	// broker; nil when there is none.
	Shim *shimView `json:"shim,omitempty"`
}

// shimView is a lock's emulated operation (store.Shim).
type shimView struct {
	State           string     `json:"state"`
	Description     string     `json:"description,omitempty"`
	Replica         string     `json:"replica,omitempty"`
	CallEnds        *time.Time `json:"call_ends,omitempty"`
	BrokerAsync     bool       `json:"broker_async"`
	BrokerOperation string     `json:"broker_operation,omitempty"`
	Hold            bool       `json:"hold"`
}

func viewLock(l store.Lock) lockView {
	v := lockView{Key: l.Key, Owner: l.Owner, Kind: l.Kind, Tenant: l.Tenant, Broker: l.Broker,
		InstanceID: l.InstanceID, BindingID: l.BindingID, ServiceID: l.ServiceID, PlanID: l.PlanID,
		Async: l.Async, Operation: l.Operation, Started: l.Started, Deadline: l.Deadline}
	if sh := l.Shim; sh != (store.Shim{}) {
		v.Shim = &shimView{State: sh.State, Description: sh.Description, Replica: sh.Replica,
			BrokerAsync: sh.BrokerAsync, BrokerOperation: sh.BrokerOperation, Hold: sh.Hold}
		if !sh.CallEnds.IsZero() {
			t := sh.CallEnds
			v.Shim.CallEnds = &t
		}
	}
	return v
}

// orphanView is a pending orphan mitigation as the admin routes show it.
type orphanView struct {
	ID           string     `json:"id"`
	Broker       string     `json:"broker"`
	Tenant       string     `json:"tenant"`
	Kind         string     `json:"kind"`
	InstanceID   string     `json:"instance_id"`
	BindingID    string     `json:"binding_id,omitempty"`
	ServiceID    string     `json:"service_id,omitempty"`
	PlanID       string     `json:"plan_id,omitempty"`
	Reason       string     `json:"reason"`
	Attempts     int        `json:"attempts"`
	NextAttempt  time.Time  `json:"next_attempt"`
	Created      time.Time  `json:"created"`
	LastError    string     `json:"last_error,omitempty"`
	LockOwner    string     `json:"lock_owner,omitempty"`
	ClaimedBy    string     `json:"claimed_by,omitempty"`
	ClaimedUntil *time.Time `json:"claimed_until,omitempty"`
}

func viewOrphan(o store.Orphan) orphanView {
	v := orphanView{ID: o.ID, Broker: o.Broker, Tenant: o.Tenant, Kind: o.Kind, InstanceID: o.InstanceID,
		BindingID: o.BindingID, ServiceID: o.ServiceID, PlanID: o.PlanID, Reason: o.Reason, Attempts: o.Attempts,
		NextAttempt: o.NextAttempt, Created: o.Created, LastError: o.LastError, LockOwner: o.LockOwner, ClaimedBy: o.ClaimedBy}
	if !o.ClaimedUntil.IsZero() {
		t := o.ClaimedUntil
		v.ClaimedUntil = &t
	}
	return v
}

func viewOrphans(os []store.Orphan) []orphanView {
	out := make([]orphanView, 0, len(os))
	for _, o := range os {
		out = append(out, viewOrphan(o))
	}
	return out
}
