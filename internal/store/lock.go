package store

// The operation lock: what a Store keeps of an operation in progress on a
// service instance or a binding, its keys, and the filter List takes.

import (
	"context"
	"errors"
	"time"
)

// Lock and orphan kinds: the OSB call that took a lock, or that an orphan
// still has to make.
const (
	KindProvision   = "provision"
	KindUpdate      = "update"
	KindDeprovision = "deprovision"
	KindBind        = "bind"
	KindUnbind      = "unbind"
)

// MaxOperationLen is the longest Lock.Operation accepted: OSB 2.15 caps a
// broker's operation string at 10,000 characters.
const MaxOperationLen = 10000

// Lock is one operation in progress on a service instance. The zero value
// is not a valid lock: Key, Owner, Kind and Deadline are required.
type Lock struct {
	// Key names what is locked: LockKey(Broker, InstanceID), or
	// BindingLockKey(Broker, InstanceID, BindingID) for a lock on one
	// binding.
	Key string
	// Owner is the unique token of the holder (one per request); only the
	// owner may Update or Release the lock.
	Owner string
	// Kind is the call holding the lock: KindProvision, KindUpdate,
	// KindDeprovision, KindBind or KindUnbind.
	Kind string
	// Tenant is the platform tenant whose call took the lock.
	Tenant string
	// Broker is the configured broker name.
	Broker string
	// InstanceID is the service instance id.
	InstanceID string
	// BindingID is the binding id for bind and unbind; empty otherwise.
	BindingID string
	// ServiceID and PlanID are the offering and plan of the call, for
	// polling last_operation; either may be empty.
	ServiceID, PlanID string
	// Async is true once the broker answered 202 Accepted: the lock then
	// holds until last_operation reports succeeded or failed.
	Async bool
	// Operation is the broker's operation string from a 202 answer, at most
	// MaxOperationLen characters; empty if the broker sent none.
	Operation string
	// TraceParent is the W3C traceparent of the span that started the
	// operation, so its polls and expiry can link to it; may be empty.
	TraceParent string
	// Started is when the operation began; zero means "now" on Acquire and
	// Update.
	Started time.Time
	// Deadline is when the lock expires by itself; it must be after the
	// store's clock when the lock is written.
	Deadline time.Time
	// Shim, when its State is set, makes the lock an asynchronous
	// operation the gateway emulates for a broker that answers
	// synchronously (the async shim); Operation is then the gateway's.
	Shim Shim
	// Replaced, set only on the lock Acquire returns, is the expired lock
	// of another owner that Acquire took the key over from before any
	// sweep (ExpireDue) released it: the caller then owes it what the
	// sweep does with an expired lock. It is never stored.
	Replaced *Lock
}

// Shim is an asynchronous operation the gateway emulates for a broker that
// answers synchronously (brokers[].emulate.async_after): the platform got
// 202 with the lock's Operation, the broker call runs on in one gateway
// process, and any replica answers the platform's last_operation from
// this record. The zero value (State empty) is no emulated operation.
type Shim struct {
	// State is StateInProgress while the broker call runs, then
	// StateSucceeded or StateFailed; empty: no emulated operation.
	State string
	// Description is the outcome as the platform reads it (the broker's
	// description of a failure, or the gateway's); may be empty.
	Description string
	// Replica names the gateway process that runs the broker call.
	Replica string
	// CallEnds is when that call must have ended (its start, the broker's
	// timeout and a margin): an operation still in progress after it lost
	// its gateway process.
	CallEnds time.Time
	// BrokerAsync means the broker answered 202 after all: polls then go
	// to the broker, with its own operation BrokerOperation (at most
	// MaxOperationLen characters; empty when it sent none).
	BrokerAsync     bool
	BrokerOperation string
	// Hold means the broker may still be working (it did not answer in
	// time, or its gateway died): the poll that reports the outcome leaves
	// the lock to its Deadline, or to the orphan mitigation that takes it
	// over, instead of releasing it.
	Hold bool
	// Challenged is when a gateway replica other than Replica found the
	// operation still in progress after CallEnds and asked Replica to show
	// it is alive: a live Replica whose outcome waited for the store
	// writes it (and so clears this) within the retry queue's backoff; an
	// operation still in progress well after Challenged lost its process.
	// Zero: not challenged.
	Challenged time.Time
}

// LockKey returns the Lock.Key for a service instance of a broker:
// "<broker>/<instance id>".
func LockKey(broker, instanceID string) string {
	return broker + "/" + instanceID
}

// BindingLockKey returns the Lock.Key for one binding of a service
// instance: "<broker>/<instance id>/<binding id>", beside the instance's
// own LockKey.
func BindingLockKey(broker, instanceID, bindingID string) string {
	return LockKey(broker, instanceID) + "/" + bindingID
}

// ListFilter selects locks for List; an empty field matches every lock.
type ListFilter struct {
	// Broker keeps locks with this Lock.Broker.
	Broker string
	// Tenant keeps locks with this Lock.Tenant.
	Tenant string
	// InstanceID keeps the locks of one service instance of Broker, which
	// must be set with it: the locks with this Lock.InstanceID whose Key is
	// LockKey(Broker, InstanceID) or BindingLockKey(Broker, InstanceID, any
	// binding), that is the instance's own lock and its binding locks.
	// List then reads only keys under that prefix.
	InstanceID string
	// Expired makes List also return the locks whose Deadline has passed
	// but that are still stored: no ExpireDue (sweep) or Acquire has
	// removed them yet (on Redis, at most until their TTL of
	// RedisTTLMargin past the Deadline runs out). A provision's such lock
	// is a call that was never settled (its gateway died): a quota counts
	// it until the sweep has turned it into an orphan candidate.
	Expired bool
}

// PrepareReading is what AcquireReading checks before its round trip, on
// the backends that make it one: the context, the instance's key and the
// lock itself (PrepareLock at now).
func PrepareReading(ctx context.Context, l Lock, now time.Time) (Lock, error) {
	if err := ctx.Err(); err != nil {
		return Lock{}, err
	}
	if err := CheckInstanceKey(l.Broker, l.InstanceID); err != nil {
		return Lock{}, err
	}
	return PrepareLock(l, now)
}

// AcquireThenRead is AcquireReading as two calls of s, Acquire and then
// GetInstance: what memory and bolt do (neither call costs a round trip),
// and Redis on a Cluster (the lock and the record may be on two servers,
// and a pipeline over both would not keep the order).
func AcquireThenRead(ctx context.Context, s Store, l Lock) (Lock, *Instance, error) {
	if err := CheckInstanceKey(l.Broker, l.InstanceID); err != nil {
		return Lock{}, nil, err
	}
	held, err := s.Acquire(ctx, l)
	if err != nil {
		return held, nil, err
	}
	in, err := s.GetInstance(ctx, l.Broker, l.InstanceID)
	switch {
	case errors.Is(err, ErrNotFound):
		return held, nil, nil
	case err != nil:
		return held, nil, err
	}
	return held, &in, nil
}
