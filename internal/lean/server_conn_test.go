package lean

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The behaviour of a lean.Server's connections over time: hang-ups,
// shutdown, timeouts, panics, deadlines, unread bodies.

// await fails the test unless ch yields within 10 s.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10 s", what)
		panic("unreachable")
	}
}

// awaitEnd fails the test unless the server ends conn (a read fails with
// EOF or a reset, not with the 10 s deadline) before sending more.
func awaitEnd(t *testing.T, conn net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := br.ReadByte()
	switch {
	case err == nil:
		t.Fatalf("read %q, want the connection's end", b)
	case isTimeoutErr(err):
		t.Fatal("the connection is still open after 10 s")
	}
}

func TestServerHangupCancels(t *testing.T) {
	started, cause := make(chan struct{}), make(chan error, 1)
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-r.Context().Done()
		cause <- context.Cause(r.Context())
	}), func(_ *http.Server, l *Server) { l.HangupAfter = time.Millisecond })
	conn := dial(t, s.lean)
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	await(t, started, "handler")
	_ = conn.SetLinger(0) // the close resets the connection: a hang-up
	conn.Close()
	if err := await(t, cause, "cancellation of the request's context"); !errors.Is(err, errClientGone) {
		t.Errorf("cause %v, want %v", err, errClientGone)
	}
}

// A client that half-closes its side (RFC 9112 §9.6) still reads the
// answer: the watch sees the end, but the request's context runs on, and
// the answer is written before the connection closes.
func TestServerHalfCloseDoesNotCancel(t *testing.T) {
	seen := make(chan struct{})
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !watchState(w, func(c *serverConn) bool { return c.hungUp }) {
			panic("the watch did not see the client's end")
		}
		close(seen)
		if r.Context().Err() != nil {
			panic("a half-close was taken for a hang-up")
		}
		describe(w, r)
	}), func(_ *http.Server, l *Server) { l.HangupAfter = time.Millisecond })
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, at("/first")); err != nil {
		t.Fatal(err)
	}
	_ = conn.CloseWrite()
	x := readAnswers(bufio.NewReader(conn), 1, http.MethodGet, true)
	await(t, seen, "watch")
	if len(x.Answers) != 1 || x.Answers[0].Status != http.StatusOK || !strings.Contains(x.Answers[0].Body, `"RequestURI":"/first"`) {
		t.Fatalf("answers %+v, want the request answered", x)
	}
}

// watchState polls the state of the watch of the request w answers
// until cond holds, for up to 10 s, and reports whether it did.
func watchState(w http.ResponseWriter, cond func(c *serverConn) bool) bool {
	c := w.(*response).c
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		c.mu.Lock()
		ok := cond(c)
		c.mu.Unlock()
		if ok {
			return true
		}
		time.Sleep(time.Millisecond) // polling a condition, not a race
	}
	return false
}

// A pipelined request is not a hang-up: the watch reads its first byte
// and keeps it for the next request's reading.
func TestServerPipelinedNotHangup(t *testing.T) {
	watching, stashed := make(chan bool, 1), make(chan bool, 1)
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" {
			watching <- watchState(w, func(c *serverConn) bool { return c.watch == watchReading })
			stashed <- watchState(w, func(c *serverConn) bool { return c.watch == watchFinished && c.stashed })
			if r.Context().Err() != nil {
				panic("the next request was taken for a hang-up")
			}
		}
		describe(w, r)
	}), func(_ *http.Server, l *Server) { l.HangupAfter = time.Millisecond })
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, at("/first")); err != nil {
		t.Fatal(err)
	}
	if !await(t, watching, "watch") {
		t.Fatal("the watch did not start")
	}
	if _, err := io.WriteString(conn, at("/second?q=1", "X-A: 1\r\n")); err != nil {
		t.Fatal(err)
	}
	if !await(t, stashed, "stash") {
		t.Fatal("the watch did not read the next request's first byte")
	}
	x := readAnswers(bufio.NewReader(conn), 2, http.MethodGet, true)
	if len(x.Answers) != 2 || !strings.Contains(x.Answers[1].Body, `"RequestURI":"/second?q=1"`) ||
		!strings.Contains(x.Answers[1].Body, `"X-A":["1"]`) {
		t.Fatalf("answers %+v, want the second request served intact", x)
	}
}

// A client that sends requests in one write and closes its side is not
// gone before their answers (net/http serves them too): the watch sees
// the end while the first runs, the second, read already, is served.
func TestServerPipelinedThenHalfClose(t *testing.T) {
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/first" && !watchState(w, func(c *serverConn) bool { return c.hungUp }) {
			panic("the watch did not see the client's end")
		}
		describe(w, r)
	}), func(_ *http.Server, l *Server) { l.HangupAfter = time.Millisecond })
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, at("/first")+at("/second")); err != nil {
		t.Fatal(err)
	}
	_ = conn.CloseWrite()
	x := readAnswers(bufio.NewReader(conn), 2, http.MethodGet, true)
	if len(x.Answers) != 2 || !strings.Contains(x.Answers[1].Body, `"RequestURI":"/second"`) {
		t.Fatalf("answers %+v, want both requests served", x)
	}
}

func TestServerShutdown(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			close(started)
			<-release
		}
		_, _ = io.WriteString(w, "done")
	}), nil)
	idle := dial(t, s.lean)
	defer idle.Close()
	idleBr := bufio.NewReader(idle)
	if _, err := io.WriteString(idle, get); err != nil {
		t.Fatal(err)
	}
	if x := readAnswers(idleBr, 1, http.MethodGet, true); len(x.Answers) != 1 || x.Ended {
		t.Fatalf("first answer: %+v", x)
	}
	active := dial(t, s.lean)
	defer active.Close()
	if _, err := io.WriteString(active, at("/block")); err != nil {
		t.Fatal(err)
	}
	await(t, started, "handler")

	shut := make(chan error, 1)
	go func() { shut <- s.lean_.Shutdown(context.Background()) }()
	awaitEnd(t, idle, idleBr) // closed at once, while the other runs
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v with a request running", err)
	default:
	}
	close(release)
	activeBr := bufio.NewReader(active)
	x := readAnswers(activeBr, 1, http.MethodGet, true)
	if len(x.Answers) != 1 || x.Answers[0].Body != "done" || !x.Answers[0].Close || !x.Ended {
		t.Fatalf("the running request's answer: %+v, want done with Connection: close, then the end", x)
	}
	if err := await(t, shut, "Shutdown's return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", s.lean); err == nil {
		t.Error("the listener still accepts after Shutdown")
	}
}

func TestServerCloseCuts(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	defer close(release)
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		<-release
	}), nil)
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	await(t, started, "handler")
	if err := s.lean_.Close(); err != nil {
		t.Fatal(err)
	}
	awaitEnd(t, conn, bufio.NewReader(conn))
}

func TestServerReadHeaderTimeout(t *testing.T) {
	s := startServers(t, http.HandlerFunc(describe), func(_ *http.Server, l *Server) {
		l.ReadHeaderTimeout = 50 * time.Millisecond
	})
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /v2/catalog HTTP/1.1\r\nHost: gw\r\n"); err != nil {
		t.Fatal(err)
	}
	awaitEnd(t, conn, bufio.NewReader(conn))
}

func TestServerIdleTimeout(t *testing.T) {
	s := startServers(t, http.HandlerFunc(describe), func(_ *http.Server, l *Server) {
		l.IdleTimeout = 50 * time.Millisecond
	})
	conn := dial(t, s.lean)
	defer conn.Close()
	br := bufio.NewReader(conn)
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	if x := readAnswers(br, 1, http.MethodGet, true); len(x.Answers) != 1 || x.Answers[0].Close {
		t.Fatalf("answer: %+v, want one that keeps the connection", x)
	}
	awaitEnd(t, conn, br)
}

func TestServerPanic(t *testing.T) {
	for _, c := range []struct {
		name   string
		v      any
		logged bool
	}{
		{"panic is logged", "boom in the handler", true},
		{"ErrAbortHandler is not", http.ErrAbortHandler, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, "partial")
				panic(c.v)
			}), nil)
			conn := dial(t, s.lean)
			defer conn.Close()
			if _, err := io.WriteString(conn, get); err != nil {
				t.Fatal(err)
			}
			awaitEnd(t, conn, bufio.NewReader(conn)) // no answer: the end
			got := s.leanLog.String()
			if logged := strings.Contains(got, "boom in the handler") && strings.Contains(got, "panic serving"); logged != c.logged {
				t.Errorf("log %q: logged %v, want %v", got, logged, c.logged)
			}
			if !c.logged && got != "" {
				t.Errorf("log %q, want nothing", got)
			}
		})
	}
}

// http.NewResponseController(w).SetReadDeadline reaches the connection:
// a body that does not come ends the handler's read with a timeout.
func TestServerSetReadDeadline(t *testing.T) {
	s := startServers(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if err := rc.SetReadDeadline(time.Now().Add(20 * time.Millisecond)); err != nil {
			panic(err)
		}
		_, err := io.ReadAll(r.Body)
		if err := rc.SetWriteDeadline(time.Now().Add(10 * time.Second)); err != nil {
			panic(err)
		}
		_, _ = io.WriteString(w, "deadline: "+strconv.FormatBool(errors.Is(err, os.ErrDeadlineExceeded)))
	}), nil)
	conn := dial(t, s.lean)
	defer conn.Close()
	if _, err := io.WriteString(conn, "PUT / HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhe"); err != nil {
		t.Fatal(err)
	}
	x := readAnswers(bufio.NewReader(conn), 1, http.MethodGet, true)
	if len(x.Answers) != 1 || x.Answers[0].Body != "deadline: true" || !x.Answers[0].Close {
		t.Fatalf("answer %+v, want the read to end at the deadline, and the connection closed after", x)
	}
}

// A body the handler left unread is drained when small, and the
// connection serves the next request; a larger one closes it.
func TestServerUnreadBody(t *testing.T) {
	s := startServers(t, http.HandlerFunc(testHandler), nil)
	for _, c := range []struct {
		name  string
		size  int
		reuse bool
	}{
		{"small: drained", 1000, true},
		{"at the limit: drained", maxDrain, true},
		{"large: closed", maxDrain + 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, s.lean)
			defer conn.Close()
			head := "POST /x/noread HTTP/1.1\r\nHost: gw\r\nContent-Length: " + strconv.Itoa(c.size) + "\r\n\r\n"
			wrote := make(chan error, 1)
			go func() { // the server may close before it has read it all
				_, err := io.WriteString(conn, head+strings.Repeat("b", c.size)+get)
				wrote <- err
			}()
			br := bufio.NewReader(conn)
			x := readAnswers(br, 2, http.MethodGet, true)
			if c.reuse {
				if len(x.Answers) != 2 || x.Answers[0].Close || !strings.Contains(x.Answers[1].Body, `"RequestURI":"/v2/catalog"`) {
					t.Fatalf("answers %+v, want ok and the next request's", x)
				}
				await(t, wrote, "the request's writing")
				return
			}
			if len(x.Answers) != 1 || !x.Answers[0].Close || !x.Ended {
				t.Fatalf("answers %+v, want one with Connection: close, then the end", x)
			}
		})
	}
}
