package store

// The orphan: a deprovision or unbind the gateway still has to make, with
// its schedule and its claim (see the package doc's Orphan claims).

import (
	"time"
)

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
	// LockOwner is the Lock.Owner under which the orphan holds its
	// instance's lock while it waits (after a broker timeout, say), so
	// that no other operation starts on the instance before mitigation
	// ends; empty if it holds none. The store keeps it and nothing more:
	// releasing that lock is the caller's job.
	LockOwner string
	// HoldUntil is when the call that may have left the orphan is over at
	// the broker at the latest (the hold after a broker timeout, or after a
	// lost call of the async shim): until then the broker may still be
	// creating what the undo would delete, so a 410 proves nothing and the
	// undo does not go before it. Zero: no such call.
	HoldUntil time.Time
	// Undoing is set once the broker answered the undo with 202: its
	// deletion is asynchronous, and the next attempt polls it (with
	// UndoOperation, the broker's operation, "" when it sent none) before
	// it sends another DELETE; the orphan goes only when the broker says
	// the deletion succeeded (or 410).
	Undoing       bool
	UndoOperation string
	// ClaimedBy names the claimant (a gateway replica) carrying the
	// mitigation out, set by ClaimOrphan; empty when unclaimed.
	ClaimedBy string
	// ClaimedUntil is when the claim lapses: the claim is live while
	// ClaimedUntil is after the store's clock. Zero exactly when ClaimedBy
	// is empty.
	ClaimedUntil time.Time
}
