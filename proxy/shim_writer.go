package proxy

import (
	"bytes"
	"net/http"
	"slices"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// shimWriter is the ResponseWriter of a broker call the async shim may
// answer for: it keeps the answer until it is known who gets it, the
// platform (writeTo) or the shim's record of the outcome.
type shimWriter struct {
	header http.Header
	status int // 0 until written
	body   bytes.Buffer
}

func (b *shimWriter) Header() http.Header { return b.header }

// WriteHeader keeps the first final status; 1xx answers are dropped.
func (b *shimWriter) WriteHeader(code int) {
	if b.status == 0 && code >= 200 {
		b.status = code
	}
}

func (b *shimWriter) Write(p []byte) (int, error) {
	if b.status == 0 {
		b.status = http.StatusOK
	}
	return b.body.Write(p)
}

// Flush implements http.Flusher: nothing reaches the platform before the
// call has ended.
func (b *shimWriter) Flush() {}

// writeTo writes what was kept to w; nothing when nothing was written (a
// platform gone, recorded in the Scope).
func (b *shimWriter) writeTo(w http.ResponseWriter) {
	if b.status == 0 {
		return
	}
	h := w.Header()
	for k, v := range b.header {
		h[k] = v
	}
	w.WriteHeader(b.status)
	_, _ = w.Write(b.body.Bytes())
}

// fork returns a copy of s for a broker call that runs in a goroutine of
// its own (the async shim), answering into buf: the copy fills its own
// findings, status and lock while s stays the platform's request's. c is
// the call's shim record, shared by both.
func (s *Scope) fork(buf http.ResponseWriter, c *core.ShimCall) *Scope {
	f := new(Scope)
	*f = *s
	f.W = statusWriter{ResponseWriter: buf, scope: f}
	f.Status, f.Bytes = 0, 0
	f.Findings = slices.Clip(s.Findings) // appends go to a new array
	f.Shim = c
	if s.Lock != nil {
		l := *s.Lock
		f.Lock = &l
	}
	return f
}

// adopt takes back into s what the broker call filled into f, the fork of
// s, once the call ended and its answer goes to the platform: everything
// but what the platform's writer records (Status, Bytes), which writing the
// answer fills.
func (s *Scope) adopt(f *Scope) {
	w, status, n := s.W, s.Status, s.Bytes
	*s = *f
	s.W, s.Status, s.Bytes = w, status, n
}
