package rules

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// SyncWait is how the gateway serves a platform that cannot wait
// (brokers[].emulate.sync_within): a call the platform sent without
// accepts_incomplete=true, which the broker refused with 422
// AsyncRequired, is repeated with the flag, its operation polled at Poll,
// and the platform answered synchronously with what it would have got
// from a broker that did the work within the call.
type SyncWait struct {
	// Poll is the last_operation endpoint of the operation.
	Poll Endpoint
	// Success is the status of the synchronous answer once the operation
	// succeeded: 201 for a provision or bind, 200 for the others.
	Success int
	// Fetch: the success answer's body is the broker's GET binding answer
	// (a bind's credentials come only from there once it was asynchronous),
	// which needs OSB 2.14 and bindings_retrievable.
	Fetch bool
	// Keep: the success answer's body is the 202's (a provision's or
	// update's dashboard_url), less Drop; else it is the GET binding
	// answer's less Drop (Fetch), or {}.
	Keep bool
	// Drop are the members of that body the synchronous answer leaves out:
	// an "operation" has no place in a synchronous answer, nor
	// "parameters" in a bind's.
	Drop []string
}

// syncWaits is the table of SyncWaitOf: the mutating endpoints whose
// asynchronous form the gateway can wait for.
var syncWaits = map[Endpoint]SyncWait{
	Provision:   {Poll: InstanceLastOperation, Success: http.StatusCreated, Keep: true, Drop: []string{"operation"}},
	Update:      {Poll: InstanceLastOperation, Success: http.StatusOK, Keep: true, Drop: []string{"operation"}},
	Deprovision: {Poll: InstanceLastOperation, Success: http.StatusOK},
	Bind:        {Poll: BindingLastOperation, Success: http.StatusCreated, Fetch: true, Drop: []string{"parameters"}},
	Unbind:      {Poll: BindingLastOperation, Success: http.StatusOK},
}

// SyncFailed is the status of the synchronous answer to an operation the
// broker reported failed. A 4xx, so that the platform does not mitigate an
// orphan: Cloud Controller never mitigates after a failed last_operation
// (shared/spec/cloud-controller-orphan-mitigation.md: "Cloud Foundry will
// not attempt any OM for any of the responses from instances or bindings
// Last Operation requests"), and 4xx is the one class its provision and
// bind tables leave alone whatever the body (a 422 without a known code
// would be mitigated, a 5xx always is). 400 is valid for every mutating
// endpoint at every version.
const SyncFailed = http.StatusBadRequest

// SyncWaitOf returns how the gateway waits for the asynchronous form of
// c's endpoint; false for endpoints that have none.
func SyncWaitOf(c Call) (SyncWait, bool) {
	w, ok := syncWaits[c.Endpoint]
	return w, ok
}

// AsyncRequired reports whether a is the broker's 422 AsyncRequired to c, a
// call the platform sent without accepts_incomplete=true, on an endpoint
// the gateway can wait for: the answer brokers[].emulate.sync_within
// serves.
func AsyncRequired(c Call, a Answer) bool {
	if c.AcceptsIncomplete || a.Status != http.StatusUnprocessableEntity || a.Code != osb.CodeAsyncRequired {
		return false
	}
	_, ok := syncWaits[c.Endpoint]
	return ok
}

// SyncBody returns the body of the synchronous success answer: the JSON
// object from (the 202's body, or GET binding's: see SyncWait.Keep and
// Fetch) without the members w drops, the others byte for byte in their
// order (of members a platform reads alike, such as "operation" and
// "Operation", all are dropped); "{}" when w keeps no body or from is no JSON object.
func SyncBody(w SyncWait, from []byte) []byte {
	start := jsonfast.SkipSpace(from, 0)
	if !w.Keep && !w.Fetch || start == len(from) || from[start] != '{' || !jsonfast.Valid(from) {
		return []byte("{}")
	}
	var buf [16]jsonfast.Member
	ms, _, ok := jsonfast.AppendObjectMembers(buf[:0], from, start)
	if !ok {
		return []byte("{}")
	}
	out := make([]byte, 0, len(from))
	out = append(out, '{')
	for _, m := range ms {
		if dropped(m, from, w.Drop) {
			continue
		}
		if len(out) > 1 {
			out = append(out, ',')
		}
		out = append(out, from[m.KeyStart:m.KeyEnd]...)
		out = append(out, ':')
		out = append(out, from[m.ValStart:m.ValEnd]...)
	}
	return append(out, '}')
}

// dropped reports whether member m of doc is one of names as a platform's
// encoding/json reads it (without regard to case).
func dropped(m jsonfast.Member, doc []byte, names []string) bool {
	for _, n := range names {
		if _, ok := (jsonfast.Object{m}).LastFold(doc, n); ok {
			return true
		}
	}
	return false
}
