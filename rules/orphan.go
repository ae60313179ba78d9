package rules

import (
	"fmt"
	"net/http"
)

// orphanRow is one row of the orphan-mitigation table: for a provision or
// bind answered with a status in [lo, hi], whether the gateway should undo
// it (deprovision or unbind) because the broker may have created something
// the platform will not track.
type orphanRow struct {
	lo, hi int
	// malformed: the row applies only when the body is not a JSON object;
	// wellFormed: only when it is.
	malformed, wellFormed bool
	mitigate              bool
	reason                string
}

// orphanTable follows Cloud Controller's record (shared/spec/
// cloud-controller-orphan-mitigation.md) and OSB 2.15/2.17, first match
// wins: a 201 or 202 with a malformed body, any other 2xx than
// 200/201/202, and any 5xx call for mitigation; 200, well-formed 201/202,
// 408, every other 4xx (ConcurrencyError, AsyncRequired, RequiresApp
// included) do not. A gateway timeout is handled by OrphanOnTimeout.
var orphanTable = [...]orphanRow{
	{lo: 200, hi: 200, mitigate: false},
	{lo: 201, hi: 202, malformed: true, mitigate: true, reason: "the broker answered %d with a malformed body"},
	{lo: 201, hi: 202, wellFormed: true, mitigate: false},
	{lo: 203, hi: 299, mitigate: true, reason: "the broker answered %d, not 200, 201 or 202"},
	{lo: 400, hi: 499, mitigate: false},
	{lo: 500, hi: 599, mitigate: true, reason: "the broker answered %d"},
}

// OrphanCandidate reports whether a provision or bind answered with a (as
// ReadResponse or CheckResponse read it; a body cut short is no object)
// may have left an orphan behind, and why. Other endpoints never do (an
// update is never mitigated).
func OrphanCandidate(c Call, a Answer) (bool, string) {
	if c.Endpoint != Provision && c.Endpoint != Bind {
		return false, ""
	}
	status, wellFormed := a.Status, a.Object
	for _, r := range orphanTable {
		if status < r.lo || status > r.hi || (r.malformed && wellFormed) || (r.wellFormed && !wellFormed) {
			continue
		}
		if !r.mitigate {
			return false, ""
		}
		return true, fmt.Sprintf(r.reason, status)
	}
	return false, ""
}

// OrphanOnTimeout reports whether a provision or bind the broker did not
// answer in time may have left an orphan: it may have, so yes.
func OrphanOnTimeout(c Call) (bool, string) {
	if c.Endpoint != Provision && c.Endpoint != Bind {
		return false, ""
	}
	return true, "the broker did not answer in time (" + http.StatusText(http.StatusGatewayTimeout) + ")"
}

// OrphanUnseen reports whether a provision or bind the broker answered
// with a success (200, 201 or 202) left an orphan because the platform did
// not get that answer (why says what happened instead, e.g. "the platform
// went away before the answer reached it"): the platform takes the call as
// failed and does not track what the broker created, which is Cloud
// Controller's "5xx" and "client timeout" rows.
func OrphanUnseen(c Call, status int, why string) (bool, string) {
	if (c.Endpoint != Provision && c.Endpoint != Bind) || status < 200 || status > 202 {
		return false, ""
	}
	return true, fmt.Sprintf("the broker answered %d but %s", status, why)
}

// OrphanSettled reports whether a call's answer, seen by the platform,
// leaves nothing of an earlier failed attempt on the same instance or
// binding to undo: a provision or bind that succeeded (200, 201, 202) made
// the resource the platform's again, and a deprovision or unbind that
// succeeded (200, 202, 410 Gone) removed it. A pending orphan mitigation
// of the resource is then cancelled.
func OrphanSettled(c Call, status int) bool {
	switch c.Endpoint {
	case Provision, Bind:
		return status >= 200 && status <= 202
	case Deprovision, Unbind:
		return status == http.StatusOK || status == http.StatusAccepted || status == http.StatusGone
	}
	return false
}
