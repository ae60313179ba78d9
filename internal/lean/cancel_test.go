package lean

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
)

// A request's Canceler and its call hook: what CancelerOf finds, what
// Cancel ends, and that neither reaches past its request.

var errTestCause = errors.New("test cause")

func TestCancelerOf(t *testing.T) {
	type key struct{}
	for _, c := range []struct {
		name string
		ctx  func(r *http.Request) (context.Context, func())
		ok   bool
	}{
		{"the request's context", func(r *http.Request) (context.Context, func()) { return r.Context(), func() {} }, true},
		{"a value on it", func(r *http.Request) (context.Context, func()) {
			return context.WithValue(r.Context(), key{}, 1), func() {}
		}, true},
		{"a cancelation of its own", func(r *http.Request) (context.Context, func()) {
			return context.WithCancel(r.Context())
		}, false},
		{"without its cancelation", func(r *http.Request) (context.Context, func()) {
			return context.WithoutCancel(r.Context()), func() {}
		}, false},
		{"another context", func(r *http.Request) (context.Context, func()) { return context.Background(), func() {} }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := make(chan error, 1)
			s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ctx, release := c.ctx(r)
				defer release()
				k, ok := CancelerOf(ctx)
				if ok != c.ok {
					got <- errors.New("CancelerOf's ok is not as wanted")
					return
				}
				if !ok {
					got <- nil
					return
				}
				k.Cancel(errTestCause)
				<-r.Context().Done()
				got <- context.Cause(r.Context())
			}), nil)
			get1(t, s.lean)
			err := await(t, got, "the handler's finding")
			if c.ok && !errors.Is(err, errTestCause) || !c.ok && err != nil {
				t.Errorf("got %v", err)
			}
		})
	}
}

// TestCancelerIsStaleAfterItsRequest: a Canceler kept past its request
// (a broker timeout that fires late) does not cancel the next request on
// the same connection, nor does its call's hook run in it.
func TestCancelerIsStaleAfterItsRequest(t *testing.T) {
	kept := make(chan Canceler, 1)
	second := make(chan error, 1)
	var n int
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n++
		k, ok := CancelerOf(r.Context())
		if !ok {
			t.Error("no Canceler for a running request")
			return
		}
		if n == 1 {
			kept <- k
			return
		}
		ran := false
		w2 := watchCall(r.Context(), func() { ran = true })
		(<-kept).Cancel(errTestCause)
		if err := r.Context().Err(); err != nil || ran {
			second <- errors.New("the first request's Canceler reached the second")
			return
		}
		if !w2.stop() {
			second <- errors.New("stop of a hook that did not run reported it ran")
			return
		}
		second <- nil
	}), nil)
	conn := dial(t, s.lean)
	br := bufio.NewReader(conn)
	for range 2 {
		if _, err := io.WriteString(conn, get); err != nil {
			t.Fatal(err)
		}
		if x := readAnswers(br, 1, "GET", false); len(x.Answers) != 1 || x.Answers[0].Status != 200 {
			t.Fatalf("answers %+v", x)
		}
	}
	if err := await(t, second, "the second request's finding"); err != nil {
		t.Error(err)
	}
}

// TestCallHook: the transport's interrupt registered on a request runs
// when a Canceler cancels it, and stop then says so; one still registered
// at the request's end runs then; one stopped before never runs.
func TestCallHook(t *testing.T) {
	got := make(chan string, 3)
	var endHook chan struct{}
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/cancel":
			ran := make(chan struct{})
			w2 := watchCall(r.Context(), func() { close(ran) })
			if w2.c == nil {
				got <- "not registered on the request"
				return
			}
			k, _ := CancelerOf(r.Context())
			k.Cancel(errTestCause)
			<-ran
			if w2.stop() {
				got <- "stop after the hook ran reported it had not"
				return
			}
			got <- "ok"
		case "/end":
			endHook = make(chan struct{})
			watchCall(r.Context(), func() { close(endHook) })
			got <- "ok"
		case "/stopped":
			w2 := watchCall(r.Context(), func() { got <- "a stopped hook ran" })
			if !w2.stop() {
				got <- "stop of a hook that had not run reported it ran"
				return
			}
			got <- "ok"
		}
	}), nil)
	for _, path := range []string{"/cancel", "/end", "/stopped"} {
		conn := dial(t, s.lean)
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		readAnswers(bufio.NewReader(conn), 1, "GET", false)
		conn.Close()
		if msg := await(t, got, path); msg != "ok" {
			t.Errorf("%s: %s", path, msg)
		}
		if path == "/end" {
			await(t, endHook, "the hook run at the request's end")
		}
	}
	select {
	case msg := <-got:
		t.Error(msg)
	default:
	}
}

// get1 sends one GET on a new connection to addr and reads its answer.
func get1(t *testing.T, addr string) {
	t.Helper()
	conn := dial(t, addr)
	defer conn.Close()
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	readAnswers(bufio.NewReader(conn), 1, "GET", false)
}
