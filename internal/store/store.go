// Package store keeps the gateway's durable state: the operation locks that
// block a second operation on a service instance while one is in progress
// (including an asynchronous one, until its last_operation settles), and the
// orphan-mitigation queue of deprovisions and unbinds still to be retried.
//
// Three backends share one contract, checked by one test suite: "bolt", an
// embedded bbolt file (the default, state survives a restart of one process),
// "redis", shared by replicas (standalone, Sentinel or Cluster), and
// "memory" (tests and throwaway single-process runs). Open picks one from a
// Config.
//
// # Expiry
//
// Every lock carries a Deadline. A lock whose Deadline is not after the
// store's clock (the now func given to Open, compared to the microsecond) is
// expired: it no longer exists for Acquire, Get, List, Update, Release and
// ForceRelease, and ExpireDue deletes and returns it so a sweeper can log
// it. The stored Deadline is the truth on every backend; Redis also gives
// each lock key a TTL of the time to the Deadline plus RedisTTLMargin, a
// safety net that removes abandoned keys by itself (a key removed that way is
// not reported by ExpireDue).
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors returned by a Store, wrapped with detail; match them with errors.Is.
var (
	// ErrHeld means Acquire found the lock held by another owner and not
	// expired. Acquire returns the holder beside it.
	ErrHeld = errors.New("store: lock held")
	// ErrNotOwner means Update or Release named a live lock that another
	// owner holds; nothing was changed.
	ErrNotOwner = errors.New("store: lock held by another owner")
	// ErrNotFound means there is no such live lock, or no such orphan.
	ErrNotFound = errors.New("store: not found")
	// ErrUnavailable wraps failures of the backend itself: the network, a
	// timeout, a server refusing to serve or replying with an error, an I/O
	// error, a record that does not decode, a closed Store.
	// The request may or may not have taken effect. A caller answers it
	// as "operation state unavailable" (HTTP 503), not as a logic error.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrInvalid means a Lock or Orphan given to a Store is unusable (an
	// empty Key or Owner, an unknown Kind, a Deadline not after now, an
	// Operation longer than MaxOperationLen, a time outside the years 0 to
	// 9999); nothing was changed.
	ErrInvalid = errors.New("store: invalid")
)

// noLock is ErrNotFound for the lock key.
func noLock(key string) error { return fmt.Errorf("%w: lock %s", ErrNotFound, key) }

// foundLock is what a backend's lookup of key returns: its error, else l
// when found, else ErrNotFound.
func foundLock(l Lock, found bool, err error, key string) (Lock, error) {
	switch {
	case err != nil:
		return Lock{}, err
	case !found:
		return Lock{}, noLock(key)
	}
	return l, nil
}

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
	// Key names what is locked, LockKey(Broker, InstanceID).
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
}

// LockKey returns the Lock.Key for a service instance of a broker:
// "<broker>/<instance id>".
func LockKey(broker, instanceID string) string {
	return broker + "/" + instanceID
}

// ListFilter selects locks for List; an empty field matches every lock.
type ListFilter struct {
	// Broker keeps locks with this Lock.Broker.
	Broker string
	// Tenant keeps locks with this Lock.Tenant.
	Tenant string
}

// Orphan is a pending orphan mitigation: a deprovision or unbind the gateway
// must retry in the background because a broker may have created something
// the platform does not know about. The zero value is not valid: ID and
// Kind are required.
type Orphan struct {
	// ID names the entry; PutOrphan with an existing ID replaces it.
	ID string
	// Broker is the configured broker name to call.
	Broker string
	// Tenant is the tenant whose call left the orphan.
	Tenant string
	// Kind is KindDeprovision or KindUnbind.
	Kind string
	// InstanceID and BindingID name the resource (BindingID for unbind).
	InstanceID, BindingID string
	// ServiceID and PlanID are sent as the service_id and plan_id query
	// parameters of the retried call.
	ServiceID, PlanID string
	// Reason says why mitigation started, for operators.
	Reason string
	// Attempts counts the calls made so far.
	Attempts int
	// NextAttempt is when the entry becomes due; zero means now.
	NextAttempt time.Time
	// Created is when the entry was first queued; zero means now.
	Created time.Time
	// LastError is the outcome of the last failed attempt.
	LastError string
}

// Store holds operation locks and the orphan-mitigation queue.
//
// Implementations must be safe for concurrent use by many goroutines, and
// by several processes where the backend is shared (a bolt file is opened
// by one process at a time; Redis is shared by replicas). Each change to
// one lock or one orphan is atomic: it takes effect entirely or not at all,
// and no other caller sees a state in between; in particular, of any number
// of concurrent Acquire calls for one free key, exactly one succeeds. List
// and ExpireDue are atomic per lock, not necessarily across locks.
//
// Every method honours ctx: one called with a done context returns
// ctx.Err() (possibly wrapped) without touching the backend, and a context
// ending while a call waits on the network makes it return promptly with
// ctx.Err(); the request may then have taken effect or not. (A bolt write
// waiting for a commit is not interrupted: it is skipped if its context
// has ended when its turn comes, and otherwise finishes within the time of
// a commit or two.) A caller whose Acquire ended with a context error
// should Release with the same Owner and a fresh context: that is harmless
// if the lock was never taken.
//
// Errors are ErrHeld, ErrNotOwner, ErrNotFound and ErrInvalid for outcomes
// of the request itself, ErrUnavailable for failures of the backend, or the
// context's error; all are wrapped with detail and matched with errors.Is.
// Methods never return a lock that has expired (see the package doc), except
// ExpireDue, whose job that is. Times come back in UTC, to the microsecond.
type Store interface {
	// Acquire takes l.Key for l.Owner if no live lock holds it, replacing
	// an expired lock, and returns the lock as stored (Started filled in).
	// If another owner holds a live lock on the key, Acquire returns that
	// holder and an error wrapping ErrHeld. Acquire by the owner already
	// holding the key replaces the lock with l and succeeds, so a retried
	// Acquire is harmless.
	Acquire(ctx context.Context, l Lock) (Lock, error)

	// Update replaces the live lock l.Key with l, whole (start from the
	// Lock Acquire returned), for example when the broker answers 202
	// (Async, Operation and a later Deadline), if l.Owner holds it.
	// Otherwise it returns ErrNotFound (no live lock) or ErrNotOwner and
	// changes nothing.
	Update(ctx context.Context, l Lock) error

	// Release deletes the live lock key if owner holds it; otherwise it
	// returns ErrNotFound or ErrNotOwner and changes nothing.
	Release(ctx context.Context, key, owner string) error

	// ForceRelease deletes the live lock key whoever holds it and returns
	// it: the operator's release. It returns ErrNotFound if there is none.
	ForceRelease(ctx context.Context, key string) (Lock, error)

	// Get returns the live lock key, or ErrNotFound.
	Get(ctx context.Context, key string) (Lock, error)

	// List returns the live locks matching f, sorted by Key.
	List(ctx context.Context, f ListFilter) ([]Lock, error)

	// ExpireDue deletes the locks whose Deadline is not after now and
	// returns them sorted by Deadline, then Key: what a sweeper logs as
	// expired. A lock re-acquired meanwhile is neither deleted nor returned.
	// On an error, the locks returned (if any) were deleted before it.
	ExpireDue(ctx context.Context, now time.Time) ([]Lock, error)

	// PutOrphan inserts o, or replaces the orphan with the same ID.
	PutOrphan(ctx context.Context, o Orphan) error

	// GetOrphan returns the orphan id, or ErrNotFound.
	GetOrphan(ctx context.Context, id string) (Orphan, error)

	// ListOrphans returns every queued orphan, sorted by ID.
	ListOrphans(ctx context.Context) ([]Orphan, error)

	// DeleteOrphan removes the orphan id, or returns ErrNotFound.
	DeleteOrphan(ctx context.Context, id string) error

	// DueOrphans returns up to limit orphans whose NextAttempt is not
	// after now, sorted by NextAttempt, then ID; limit <= 0 means all. It
	// does not remove or claim them: the caller updates each with
	// PutOrphan or removes it with DeleteOrphan.
	DueOrphans(ctx context.Context, now time.Time, limit int) ([]Orphan, error)

	// Ping reports whether the backend can be reached: nil, or an error
	// wrapping ErrUnavailable.
	Ping(ctx context.Context) error

	// Close releases the backend (the bolt file, the Redis connections).
	// Calls after Close return errors wrapping ErrUnavailable. Close is
	// safe to call more than once.
	Close() error
}
