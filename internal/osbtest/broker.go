package osbtest

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// Broker is a fake broker on a loopback listener that records every
// request that reaches it, body included, and answers with the respond
// func given to [NewBroker]. It is safe for concurrent use.
type Broker struct {
	*httptest.Server
	respond http.HandlerFunc

	mu   sync.Mutex
	seen []*http.Request
}

// NewBroker starts a broker that answers with respond, or, for a nil
// respond, 200 {"seen":"<request URI>"}. It is closed when the test ends.
func NewBroker(tb testing.TB, respond http.HandlerFunc) *Broker {
	tb.Helper()
	b := &Broker{respond: respond}
	b.Server = httptest.NewServer(http.HandlerFunc(b.serve))
	tb.Cleanup(b.Close)
	return b
}

func (b *Broker) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	kept := r.Clone(r.Context())
	kept.Body = io.NopCloser(bytes.NewReader(body))
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.mu.Lock()
	b.seen = append(b.seen, kept)
	b.mu.Unlock()
	if b.respond != nil {
		b.respond(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"seen":%q}`, r.URL.RequestURI())
}

// Requests returns the requests that reached the broker so far, in order.
// Their bodies hold what was sent and can be read once.
func (b *Broker) Requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.seen...)
}

// Last returns the latest request that reached the broker; the test fails
// if none has.
func (b *Broker) Last(tb testing.TB) *http.Request {
	tb.Helper()
	rs := b.Requests()
	if len(rs) == 0 {
		tb.Fatal("no request reached the broker")
	}
	return rs[len(rs)-1]
}
