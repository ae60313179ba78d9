package rules

import (
	"encoding/json"
	"net/http"
)

// The states of an operation a last_operation answer can report, as
// PollState reads them.
const (
	PollInProgress = "in progress"
	PollSucceeded  = "succeeded"
	PollFailed     = "failed"
	// PollGone is a 410 Gone answer: the resource is gone, which ends a
	// deprovision or unbind being polled.
	PollGone = "gone"
)

// PollState reads what a last_operation answer says of the polled
// operation: the "state" of a 200 answer, read even when other fields of
// the body break the rules (so an answer refused for its description still
// ends the operation it reports ended), PollGone for 410, and "" when the
// answer says nothing readable.
func PollState(status int, body []byte) string {
	switch status {
	case http.StatusGone:
		return PollGone
	case http.StatusOK:
		var lo struct {
			State json.RawMessage `json:"state"`
		}
		if json.Unmarshal(body, &lo) != nil {
			return ""
		}
		var state string
		if json.Unmarshal(lo.State, &state) != nil {
			return ""
		}
		return state
	}
	return ""
}

// PollOver reports whether state, read by PollState, ends the polled
// operation: succeeded or failed always, gone while a Deprovision or Unbind
// is polled (a 410 to the poll of a provision, update or bind is the
// broker's error, not an end: see response.last_operation.gone).
func PollOver(state string, polled Endpoint) bool {
	switch state {
	case PollSucceeded, PollFailed:
		return true
	case PollGone:
		return polled == Deprovision || polled == Unbind
	}
	return false
}
