package core

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// WithScope is the scope stage: it creates the request's Scope, fixes the
// request identity, echoes it on the response and records status and size.
func WithScope(now func() time.Time) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := &Scope{Start: now()}
			if ids := r.Header[HeaderRequestIdentity]; len(ids) == 1 && ids[0] != "" {
				s.RequestID, s.IDHeader = ids[0], ids[:1:1]
			} else {
				s.RequestID = NewRequestID()
				s.Hdrs[0] = s.RequestID
				s.IDHeader = s.Hdrs[0:1:1]
			}
			w.Header()[HeaderRequestIdentity] = s.IDHeader
			s.W = StatusWriter{ResponseWriter: w, scope: s}
			next.ServeHTTP(&s.W, r)
			if s.Status == StatusClientClosed {
				// The platform went away and gets nothing: no default
				// 200 written in the gateway's name (the stages inside
				// have recorded the 499).
				panic(http.ErrAbortHandler)
			}
			if s.Status == 0 {
				s.Status = http.StatusOK
			}
		})
	}
}

// StatusWriter records the status and body size in the Scope. It forwards
// Flush and exposes the underlying writer to http.ResponseController.
type StatusWriter struct {
	http.ResponseWriter
	scope *Scope
}

func (w *StatusWriter) WriteHeader(code int) {
	if w.scope.Status == 0 && code >= 200 {
		w.scope.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.scope.Status == 0 {
		w.scope.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.scope.Bytes += int64(n)
	return n, err
}

// Flush implements http.Flusher.
func (w *StatusWriter) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error, for http.ResponseController: a
// failed write of the answer tells the guard the platform did not get it.
func (w *StatusWriter) FlushError() error {
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Fork returns a copy of s for a broker call that runs in a goroutine of
// its own (the async shim), answering into buf: the copy fills its own
// findings, status and lock while s stays the platform's request's. c is
// the call's shim record, shared by both.
func (s *Scope) Fork(buf http.ResponseWriter, c *ShimCall) *Scope {
	f := new(Scope)
	*f = *s
	f.W = StatusWriter{ResponseWriter: buf, scope: f}
	f.Status, f.Bytes = 0, 0
	f.Findings = slices.Clip(s.Findings) // appends go to a new array
	f.Shim = c
	if s.Lock != nil {
		l := *s.Lock
		f.Lock = &l
	}
	return f
}

// Adopt takes back into s what the broker call filled into f, the fork of
// s, once the call ended and its answer goes to the platform: everything
// but what the platform's writer records (Status, Bytes), which writing the
// answer fills.
func (s *Scope) Adopt(f *Scope) {
	w, status, n := s.W, s.Status, s.Bytes
	*s = *f
	s.W, s.Status, s.Bytes = w, status, n
}

// WriteAnswer writes v as the JSON body of an answer the gateway makes in
// the broker's place (emulated, shimmed or synthesized), with the headers
// osb.WriteError gives its error bodies.
func WriteAnswer(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // strings, bools and raw JSON the store or the rules validated
		panic(err)
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(body))}
	h["X-Content-Type-Options"] = []string{"nosniff"}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
