package rules

import "net/http"

// outcomeTable lists, per mutating endpoint, the statuses of a broker's
// synchronous answer that mean the operation succeeded: 200 always, 201
// for a provision or bind that created something, 410 Gone for a
// deprovision or unbind of what was already gone (Cloud Controller takes it
// as deleted). Every other status (202 aside: the operation goes on) means
// it failed.
var outcomeTable = [...][]int{
	Provision:   {http.StatusOK, http.StatusCreated},
	Update:      {http.StatusOK},
	Deprovision: {http.StatusOK, http.StatusGone},
	Bind:        {http.StatusOK, http.StatusCreated},
	Unbind:      {http.StatusOK, http.StatusGone},
}

// Succeeded reports whether a synchronous answer with status to the
// mutating call c means its operation succeeded, as a last_operation
// answer of the same operation would report it: "succeeded", else
// "failed". A 202 is no outcome: callers check for it first.
func Succeeded(c Call, status int) bool {
	if int(c.Endpoint) >= len(outcomeTable) {
		return false
	}
	for _, s := range outcomeTable[c.Endpoint] {
		if s == status {
			return true
		}
	}
	return false
}
