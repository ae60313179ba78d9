// Package store keeps the gateway's durable state: the operation locks that
// block a second operation on a service instance while one is in progress
// (including an asynchronous one, until its last_operation settles), the
// orphan-mitigation queue of deprovisions and unbinds still to be retried,
// the inventory of the instances and bindings the gateway saw succeed
// (see Inventory), and the console's sessions (see SessionStore).
//
// This package is the contract; the backends are packages beside it, each
// importing store and none another: "bolt" (internal/store/bolt), an
// embedded bbolt file (the default, state survives a restart of one
// process), "redis" (internal/store/redis), shared by replicas
// (standalone, Sentinel or Cluster), "postgres" (internal/store/postgres),
// shared by replicas in one PostgreSQL database, and "memory"
// (internal/store/memory),
// for tests and throwaway single-process runs. One test suite,
// storetest.Contract, checks every backend against the contract;
// backend.Open (internal/store/backend) opens the one a Config names. What
// the backends share lives here too: validation, the expiry rule, the
// record encodings (JSON for locks and orphans, a packed binary layout for
// the inventory), keys and cursors.
//
// # Expiry
//
// Every lock carries a Deadline. A lock whose Deadline is not after the
// store's clock (the now func given to backend.Open, compared to the
// microsecond) is expired: it no longer exists for Acquire, Get, List (unless
// asked: ListFilter.Expired), Update, Release and ForceRelease, and ExpireDue
// deletes and returns it so a sweeper can log it. The stored Deadline is the truth on every backend; Redis also gives
// each lock key a TTL of the time to the Deadline plus RedisTTLMargin, a
// safety net that removes abandoned keys by itself (a key removed that way is
// not reported by ExpireDue).
//
// # Instance and binding locks
//
// An operation on a service instance locks LockKey(broker, instance); an
// operation on one of its bindings may instead lock BindingLockKey(broker,
// instance, binding), "<broker>/<instance>/<binding>", beside it, so that
// bindings of one instance proceed side by side. The store treats both as
// independent keys: whether a binding operation must also wait for the
// instance lock (or the reverse) is the caller's rule. List with
// ListFilter.InstanceID finds an instance's lock and its binding locks
// without reading the other locks (see List for the cost per backend).
//
// # Orphan claims
//
// Several replicas sharing a store may each run an orphan mitigator. Before
// it calls a broker, a mitigator claims the orphan with ClaimOrphan: a lease
// naming the replica (ClaimedBy) until a time (ClaimedUntil). While the
// claim is live, that is while ClaimedUntil is after the store's clock,
// other claimants get ErrHeld and DueOrphans does not offer the orphan. The
// claimant ends its work with DeleteOrphan (done) or PutOrphan with the
// claim cleared and a later NextAttempt (rescheduled); a claimant that dies
// leaves a claim that lapses at ClaimedUntil, after which the orphan is due
// again. A claim is a lease, not a fence: a claimant whose work outlasts its
// claim must claim again (a claim by the same claimant renews) before it
// writes, or another replica may be working on the orphan too.
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
	// expired, or ClaimOrphan found the orphan under a live claim of
	// another claimant. Both return the holder beside it.
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
	// ErrInvalid means a Lock, Orphan, claim or ListFilter given to a Store
	// is unusable (an empty Key or Owner, an unknown Kind, a Deadline or
	// claim not after now, an Operation longer than MaxOperationLen, a time
	// outside the years 0 to 9999, a ClaimedBy without ClaimedUntil or the
	// reverse, an InstanceID filter without a Broker); nothing was changed.
	ErrInvalid = errors.New("store: invalid")
)

// ErrClosed is what every backend returns for a call on a closed Store. It
// wraps ErrUnavailable.
var ErrClosed = fmt.Errorf("%w: store closed", ErrUnavailable)

// ErrLost is what a backend that can tell returns once its server has
// lost the data it held (a Redis restarted without persistence, or
// flushed): every lock, inventory record and orphan is gone, and the
// store refuses every call until an operator accepts the loss (osb-gateway
// state accept-loss). It wraps ErrUnavailable, so callers fail closed as
// for a store that does not answer.
var ErrLost = fmt.Errorf("%w: the store lost its data", ErrUnavailable)

// NoLock is ErrNotFound for the lock key. Every poll of an operation the
// gateway does not track ends here, so the text is put together only when
// it is read.
func NoLock(key string) error { return &lockNotFound{key: key} }

// lockNotFound is ErrNotFound for one lock key.
type lockNotFound struct{ key string }

func (e *lockNotFound) Error() string { return ErrNotFound.Error() + ": lock " + e.key }
func (e *lockNotFound) Unwrap() error { return ErrNotFound }

// FoundLock is what a backend's lookup of key returns: its error, else l
// when found, else ErrNotFound.
func FoundLock(l Lock, found bool, err error, key string) (Lock, error) {
	switch {
	case err != nil:
		return Lock{}, err
	case !found:
		return Lock{}, NoLock(key)
	}
	return l, nil
}

// Store holds operation locks, the orphan-mitigation queue and the
// inventory.
//
// Implementations must be safe for concurrent use by many goroutines, and
// by several processes where the backend is shared (a bolt file is opened
// by one process at a time; Redis and PostgreSQL are shared by replicas). Each change to
// one lock or one orphan is atomic: it takes effect entirely or not at all,
// and no other caller sees a state in between; in particular, of any number
// of concurrent Acquire calls for one free key, exactly one succeeds, and of
// any number of concurrent ClaimOrphan calls by distinct claimants for one
// orphan without a live claim, exactly one succeeds. List, ExpireDue and
// DueOrphans are atomic per lock or orphan, not necessarily across them.
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
// ExpireDue, whose job that is, and List when asked (ListFilter.Expired). Times come back in UTC, to the microsecond.
type Store interface {
	// Inventory keeps instances and bindings; its methods follow the
	// contract above and the one on Inventory.
	Inventory
	// CatalogHistory keeps each broker's catalog record (catalog drift).
	CatalogHistory

	// UsageStore keeps what the usage report needs of deleted instances
	// and bindings (usage.go).
	UsageStore

	// SessionStore keeps the console's sessions (session.go).
	SessionStore

	// Acquire takes l.Key for l.Owner if no live lock holds it, replacing
	// an expired lock, and returns the lock as stored (Started filled in;
	// Replaced set to the expired lock of another owner it replaced).
	// If another owner holds a live lock on the key, Acquire returns that
	// holder and an error wrapping ErrHeld. Acquire by the owner already
	// holding the key replaces the lock with l and succeeds, so a retried
	// Acquire is harmless.
	Acquire(ctx context.Context, l Lock) (Lock, error)

	// AcquireReading is Acquire(l) and, once the lock is taken,
	// GetInstance(l.Broker, l.InstanceID): the look at the instance's
	// record a call takes first under its lock (the owner stage's second
	// look), in the round trips of Acquire alone where the backend can:
	// PostgreSQL sends both statements in one batch, one implicit
	// transaction, Redis both commands in one pipeline (on a Cluster,
	// whose slots the two keys need not share, one after the other, as
	// memory and bolt, which cost no round trip). The read runs after the
	// acquire on the server, so it sees every record written before the
	// lock was taken. in is the record, nil when the instance has none or
	// the lock was not taken. l must name its instance (Broker,
	// InstanceID; a binding's lock names the binding's instance): else
	// ErrInvalid. Its errors are Acquire's or GetInstance's (not
	// ErrNotFound); after one of the backend (not ErrHeld, not
	// ErrInvalid) the lock may be held, as after an Acquire that failed.
	AcquireReading(ctx context.Context, l Lock) (held Lock, in *Instance, err error)

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

	// List returns the live locks matching f, sorted by Key. A filter with
	// an InstanceID but no Broker is ErrInvalid.
	//
	// Cost: without InstanceID, List reads every lock (Redis: SCANs every
	// master), which suits an operator's listing, not a request path. With
	// InstanceID, memory still looks at every lock in memory; bolt seeks
	// to the instance's keys and reads only them; Redis cannot seek by
	// prefix without an index its key layout lacks, so it still SCANs
	// every master, one round trip per 1000 keys of the database, but
	// with a MATCH on the instance's key prefix: the server filters, and
	// only the instance's locks cross the network and are decoded.
	// PostgreSQL reads a range of its primary key, the instance's keys.
	List(ctx context.Context, f ListFilter) ([]Lock, error)

	// ExpireDue deletes the locks whose Deadline is not after now and
	// returns them sorted by Deadline, then Key: what a sweeper logs as
	// expired. A lock re-acquired meanwhile is neither deleted nor returned.
	// On an error, the locks returned (if any) were deleted before it.
	ExpireDue(ctx context.Context, now time.Time) ([]Lock, error)

	// PutOrphan inserts o, or replaces the orphan with the same ID, claim
	// included: it does not check claims, so only the claimant (or an
	// operator) should replace a claimed orphan. A claimant reschedules an
	// orphan by putting it with a later NextAttempt and the claim cleared.
	PutOrphan(ctx context.Context, o Orphan) error

	// GetOrphan returns the orphan id, or ErrNotFound.
	GetOrphan(ctx context.Context, id string) (Orphan, error)

	// ListOrphans returns every queued orphan, sorted by ID.
	ListOrphans(ctx context.Context) ([]Orphan, error)

	// DeleteOrphan removes the orphan id, claimed or not, or returns
	// ErrNotFound.
	DeleteOrphan(ctx context.Context, id string) error

	// PutInstanceCancelling is PutInstance(in) and DeleteOrphan(orphanID)
	// in one call: what a provision that succeeded writes, its record and
	// the cancellation of a pending undo of the instance, in the round
	// trips of the put alone (one for a new instance). cancelled reports
	// whether there was such an orphan (claimed or not) and it is gone; an
	// empty orphanID deletes nothing. Memory and bolt do both in one
	// atomic step; PostgreSQL deletes in the put's first statement (so
	// atomically with the put of a new instance); Redis sends the deletion
	// in the put's pipeline, after its script (with replica
	// acknowledgements, acknowledged with it). An in that does not
	// validate is ErrInvalid and changes nothing; after another error
	// either may have taken effect, and the caller repeats both.
	PutInstanceCancelling(ctx context.Context, in Instance, orphanID string) (stored Instance, cancelled bool, err error)

	// DueOrphans returns up to limit orphans whose NextAttempt is not
	// after now and that have no claim live at now (ClaimedUntil after
	// now), sorted by NextAttempt, then ID; limit <= 0 means all. Claimed
	// orphans are skipped, not counted against limit. DueOrphans does not
	// remove or claim them: the caller claims each with ClaimOrphan before
	// working on it, then updates it with PutOrphan or removes it with
	// DeleteOrphan.
	DueOrphans(ctx context.Context, now time.Time, limit int) ([]Orphan, error)

	// ClaimOrphan claims the orphan id for claimant until the time until,
	// which must be after the store's clock: if the orphan has no claim
	// live at the store's clock, or claimant holds it (a renewal), it sets
	// ClaimedBy and ClaimedUntil, changing nothing else, and returns the
	// orphan as stored. If another claimant holds a live claim, ClaimOrphan
	// returns the orphan as stored and an error wrapping ErrHeld. It
	// returns ErrNotFound if there is no such orphan, and ErrInvalid for
	// an empty id or claimant or an until not after now. The check and the
	// change are one atomic step on every backend (a Lua script on Redis,
	// one UPDATE on PostgreSQL).
	ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (Orphan, error)

	// Ping reports whether the backend can be reached: nil, or an error
	// wrapping ErrUnavailable.
	Ping(ctx context.Context) error

	// Close releases the backend (the bolt file, the Redis or PostgreSQL
	// connections).
	// Calls after Close return errors wrapping ErrUnavailable. Close is
	// safe to call more than once.
	Close() error
}
