package emulate

import (
	"bytes"
	"net/http"
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
