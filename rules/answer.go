package rules

import (
	"bytes"
	"net/http"
	"unicode/utf8"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Answer is what the gateway reads of a broker's answer to a call: the
// facts the HTTP layer acts on (the operation an async call keeps, the
// state that ends a polled one, the orphan-mitigation decision), read
// once, by ReadResponse or CheckResponse, so no other layer decodes the
// body again. It holds no reference to the body. The zero value is an
// answer with status 0 that says nothing.
type Answer struct {
	// Status is the answer's HTTP status.
	Status int
	// Object reports whether the body is a well-formed JSON object: the
	// orphan-mitigation table treats any other 201 or 202 body as
	// malformed.
	Object bool
	// Operation is the "operation" string of a success (2xx) body, ""
	// when it has none.
	Operation string
	// State is what a last_operation answer says of the polled operation:
	// the "state" of a 200 answer (PollInProgress, PollSucceeded,
	// PollFailed, or whatever other string the broker sent), read even
	// when other fields of the body break the rules, so that an answer
	// refused for its description still ends the operation it reports
	// ended; PollGone for 410 Gone; "" for other answers, answers without
	// a string "state", and calls other than last_operation.
	State string
	// Description is the broker's account of a failure: the "description"
	// string of an error body (4xx, 5xx), or of a last_operation answer
	// whose state is failed. Other descriptions (progress messages) are
	// not read, so that a poll costs no allocation.
	Description string
	// Code is the "error" string of an error body (4xx, 5xx), such as
	// AsyncRequired or ConcurrencyError; "" when it has none.
	Code string
}

// Malformed reports whether a is a success (2xx) whose body is no JSON
// object: not valid JSON, empty, another JSON value, or not read whole (cut
// short, or larger than the gateway reads). A platform cannot read such an
// answer, and Cloud Controller takes it as a failure whatever its status
// says; the orphan-mitigation table reads a 201 or 202 the same way. The
// inventory records no malformed success.
func (a Answer) Malformed() bool { return a.Status >= 200 && a.Status <= 299 && !a.Object }

// The states of an operation a last_operation answer can report
// (Answer.State).
const (
	PollInProgress = "in progress"
	PollSucceeded  = "succeeded"
	PollFailed     = "failed"
	// PollGone is a 410 Gone answer: the resource is gone, which ends a
	// deprovision or unbind being polled.
	PollGone = "gone"
)

// Ends reports whether a last_operation answer ends the polled operation,
// the one the call that took the lock (polled: Provision, Update,
// Deprovision, Bind or Unbind) started: succeeded or failed always, gone
// while a Deprovision or Unbind is polled (a 410 to the poll of a
// provision, update or bind is the broker's error, not an end: see
// response.last_operation.gone).
func (a Answer) Ends(polled Endpoint) bool {
	switch a.State {
	case PollSucceeded, PollFailed:
		return true
	case PollGone:
		return polled == Deprovision || polled == Unbind
	}
	return false
}

// ReadResponse reads a broker's answer to the call c without checking it
// against the rules: for a gateway that does not check a broker's answers
// but still needs what they say. A nil body (not read, or too large to
// read) is not an object and says nothing but its status. CheckResponse
// reads the same, beside its checks: a caller calls one or the other.
func ReadResponse(c Call, status int, body []byte) Answer {
	var buf [16]jsonfast.Member // most answers have fewer members: no allocation
	a, _, _ := readAnswer(c, status, body, buf[:0])
	return a
}

// bodyShape is what a response body is, as far as the rules care before
// they look at its members.
type bodyShape uint8

const (
	shapeObject    bodyShape = iota // a JSON object
	shapeEmpty                      // nothing but whitespace
	shapeSyntax                     // not valid JSON
	shapeNotObject                  // valid JSON, but no object
)

// readAnswer reads body once: its shape and, for an object, its members
// (appended to buf, slices of body), from which the Answer's fields come.
func readAnswer(c Call, status int, body []byte, buf jsonfast.Object) (Answer, jsonfast.Object, bodyShape) {
	a := Answer{Status: status}
	lastOp := lastOperations.has(c.Endpoint)
	if lastOp && status == http.StatusGone {
		a.State = PollGone
	}
	start := jsonfast.SkipSpace(body, 0)
	switch {
	case start == len(body):
		return a, nil, shapeEmpty
	case !jsonfast.Valid(body):
		return a, nil, shapeSyntax
	case body[start] != '{':
		return a, nil, shapeNotObject
	}
	fields, _, _ := jsonfast.AppendObjectMembers(buf, body, start)
	a.Object = true
	switch {
	case lastOp && status == http.StatusOK:
		a.State = knownState(stringFold(body, fields, "state"))
		if a.State == PollFailed {
			a.Description = string(stringFold(body, fields, "description"))
		}
	case status >= 200 && status <= 299:
		a.Operation = string(stringFold(body, fields, "operation"))
	case isErrorStatus(status):
		a.Description = string(stringFold(body, fields, "description"))
		a.Code = knownCode(stringFold(body, fields, "error"))
	}
	return a, fields, shapeObject
}

// knownState returns the state s, without a copy for the states the
// specification defines.
func knownState(s []byte) string {
	for _, st := range [...]string{PollInProgress, PollSucceeded, PollFailed} {
		if string(s) == st {
			return st
		}
	}
	return string(s)
}

// knownCode returns the error code s, without a copy for the codes the
// specification defines.
func knownCode(s []byte) string {
	for _, c := range [...]string{osb.CodeAsyncRequired, osb.CodeConcurrencyError, osb.CodeRequiresApp, osb.CodeMaintenanceInfoConflict} {
		if string(s) == c {
			return c
		}
	}
	return string(s)
}

// stringFold returns the string value of the member of doc named name
// (see jsonfast.Object.LastFold), unescaped; nil when there is none or its
// value is no string. A value without escapes is a slice of doc.
func stringFold(doc []byte, ms jsonfast.Object, name string) []byte {
	m, ok := ms.LastFold(doc, name)
	if !ok {
		return nil
	}
	val := doc[m.ValStart:m.ValEnd]
	if typeOf(val) != typeString {
		return nil
	}
	if bytes.IndexByte(val, '\\') < 0 && utf8.Valid(val) {
		return val[1 : len(val)-1]
	}
	return []byte(jsonfast.Unquote(val))
}
