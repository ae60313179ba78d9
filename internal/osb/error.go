package osb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Error is the one error type that becomes an OSB error response:
// {"error": Code, "description": Description} with HTTP status Status.
// Code is omitted from the body when empty, as the specification has no code
// for most failures. Err, when set, is the underlying cause; it is logged,
// never sent. Header, when set, is added to the response (Allow,
// WWW-Authenticate, Retry-After).
type Error struct {
	Status      int
	Code        string
	Description string
	Err         error
	Header      http.Header
}

// Errorf builds an *Error with a formatted description.
func Errorf(status int, code, format string, args ...any) *Error {
	return &Error{Status: status, Code: code, Description: fmt.Sprintf(format, args...)}
}

// Error implements error.
func (e *Error) Error() string {
	s := strconv.Itoa(e.Status)
	if e.Code != "" {
		s += " " + e.Code
	}
	s += ": " + e.Description
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Body is the JSON shape of an OSB error response.
type Body struct {
	Error       string `json:"error,omitempty"`
	Description string `json:"description,omitempty"`
}

// internalDescription is what a platform sees for an error that is not an
// *Error: the detail stays in the log.
const internalDescription = "The gateway failed to handle the request; the cause is in the gateway's log."

// AsError converts any error into an *Error. An error that wraps an *Error
// yields it; anything else becomes a generic 500 that hides the detail.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: http.StatusInternalServerError, Description: internalDescription, Err: err}
}

// WriteError writes err as an OSB error response. Headers already set on w
// (Allow, WWW-Authenticate, Retry-After) are kept.
func WriteError(w http.ResponseWriter, err error) {
	e := AsError(err)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // descriptions quote paths like /<tenant>/<broker>
	_ = enc.Encode(Body{Error: e.Code, Description: e.Description})
	b := buf.Bytes()
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}
