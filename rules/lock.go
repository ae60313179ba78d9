package rules

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// InProgress is Cloud Controller's description for a call refused while
// another operation for the instance is in progress (OSB 2.10 "Blocking
// Operations").
const InProgress = "Another operation for this service instance is in progress."

// LockCheck is what a call checks beyond its own lock before it may
// proceed, as Cloud Controller's LockCheck does when bindings are locked
// apart from their instance (a gateway's lock_granularity binding).
type LockCheck uint8

const (
	// CheckNothing: the call's own lock decides (provision).
	CheckNothing LockCheck = iota
	// CheckInstance: an operation in progress on the instance blocks the
	// call (bind and unbind; raise_if_instance_locked).
	CheckInstance
	// CheckBindings: an operation in progress on any binding of the
	// instance blocks the call (update and deprovision; the instance's
	// UpdaterLock checks every binding).
	CheckBindings
)

// lockRow is how a mutating endpoint's calls lock: the kind of lock they
// take, as the gateway's state store records it, and what else they check.
type lockRow struct {
	kind  string
	check LockCheck
}

// lockTable holds a row for each mutating endpoint; the others take no
// lock. The kinds are the endpoints' names, and internal/store's Kind
// constants spell the same strings.
var lockTable = [...]lockRow{
	Provision:   {kind: "provision", check: CheckNothing},
	Update:      {kind: "update", check: CheckBindings},
	Deprovision: {kind: "deprovision", check: CheckBindings},
	Bind:        {kind: "bind", check: CheckInstance},
	Unbind:      {kind: "unbind", check: CheckInstance},
}

// LockKind returns the kind of lock a call of endpoint e takes while it
// runs ("provision", "update", "deprovision", "bind" or "unbind"), and
// false for the endpoints that take none (reads).
func LockKind(e Endpoint) (string, bool) {
	if int(e) >= len(lockTable) || lockTable[e].kind == "" {
		return "", false
	}
	return lockTable[e].kind, true
}

// LockedBy returns the endpoint whose call takes locks of kind, or Unknown.
func LockedBy(kind string) Endpoint {
	for e, row := range lockTable {
		if row.kind != "" && row.kind == kind {
			return Endpoint(e)
		}
	}
	return Unknown
}

// LockChecks returns what a call that took a lock of kind checks beyond it
// (see LockCheck); CheckNothing for an unknown kind.
func LockChecks(kind string) LockCheck {
	return lockTable[LockedBy(kind)].check
}

// concurrencyErrorSince is the version that defines 422 ConcurrencyError
// for a call blocked by another operation (OSB 2.14).
var concurrencyErrorSince = v2_14

// Busy is the answer to a call refused because another operation on its
// instance is in progress: Cloud Controller's 400 with InProgress; or, for
// a broker configured to answer as the specification says (spec:
// concurrency_error spec) and a platform at OSB 2.14 or later (v), 422
// ConcurrencyError with the same description.
func Busy(v osb.Version, spec bool) *osb.Error {
	if spec && v.AtLeast(concurrencyErrorSince) {
		return &osb.Error{Status: http.StatusUnprocessableEntity, Code: osb.CodeConcurrencyError, Description: InProgress}
	}
	return &osb.Error{Status: http.StatusBadRequest, Description: InProgress}
}
