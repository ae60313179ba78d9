package proxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveStandard serves h on net/http as osb-gateway serve does for
// listen.server: standard (ServeStandard), and returns its address.
func serveStandard(tb testing.TB, h http.Handler, wrap bool) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	if wrap {
		ln = ServeStandard(srv, ln)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	tb.Cleanup(func() { _ = srv.Close(); <-done })
	return ln.Addr().String()
}

func dialRaw(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.(*net.TCPConn)
}

// TestServeStandardHalfCloseIsNotAHangup: on net/http wired by
// ServeStandard, a request whose client half-closed runs on with its
// context alive (net/http's own is canceled by the EOF), and the client
// reads the answer.
func TestServeStandardHalfCloseIsNotAHangup(t *testing.T) {
	var seen error
	addr := serveStandard(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Wait until net/http's background read saw the EOF: it would
		// have canceled the request's context by then.
		var pc *platformConn
		pc, _ = r.Context().Value(platformConnKey{}).(*platformConn)
		if pc == nil {
			seen = errors.New("no platformConn in the request's context")
		}
		time.Sleep(20 * time.Millisecond) // not a synchronisation: the context must stay alive either way
		if err := r.Context().Err(); err != nil && seen == nil {
			seen = err
		}
		_, _ = io.WriteString(w, "answer")
	}), true)
	c := dialRaw(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
	_ = c.CloseWrite()
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || string(body) != "answer" || seen != nil {
		t.Fatalf("%d %q (context: %v), want 200 \"answer\" and the context alive", res.StatusCode, body, seen)
	}
}

// TestServeStandardResetCancels: a client that resets its connection
// cancels its request's context, with errPlatformGone.
func TestServeStandardResetCancels(t *testing.T) {
	started, cause := make(chan struct{}), make(chan error, 1)
	addr := serveStandard(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}), true)
	c := dialRaw(t, addr)
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
	<-started
	_ = c.SetLinger(0)
	c.Close()
	select {
	case err := <-cause:
		if !errors.Is(err, errPlatformGone) {
			t.Errorf("cause %v, want %v", err, errPlatformGone)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reset did not cancel the request")
	}
}

// BenchmarkServeStandard is a keep-alive GET on net/http, plain and wired
// by ServeStandard: what the half-close handling costs per request.
func BenchmarkServeStandard(b *testing.B) {
	for _, wrap := range []bool{false, true} {
		name := "plain"
		if wrap {
			name = "ServeStandard"
		}
		b.Run(name, func(b *testing.B) {
			addr := serveStandard(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "{}") }), wrap)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			br := bufio.NewReader(c)
			req := []byte("GET /v2/catalog HTTP/1.1\r\nHost: gw\r\n\r\n")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := c.Write(req); err != nil {
					b.Fatal(err)
				}
				res, err := http.ReadResponse(br, nil)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, res.Body)
				res.Body.Close()
			}
		})
	}
}
