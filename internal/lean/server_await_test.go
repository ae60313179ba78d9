package lean

import (
	"bufio"
	"context"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The server's writeAwaiting: the last of an answer written from within the
// wait for the next request. Whether an answer took that path is seen on a
// tapConn (await_test.go): writeAwaiting's raw write does not go through
// net.Conn's Write. The path needs the write to begin before the wait's
// awaitFallback deadline, so a test that must see it taken tries a few
// times; what the client sees is checked every time.

// tapListener accepts tapConns and hands each to conns.
type tapListener struct {
	net.Listener
	conns chan *tapConn
}

func (l *tapListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	c := &tapConn{TCPConn: nc.(*net.TCPConn)}
	select {
	case l.conns <- c:
	default:
	}
	return c, nil
}

// startAwaitServer serves h on loopback, with HangupAfter an hour: no
// watch reads the connection while a request runs, so what the client
// sends meanwhile stays in the socket for the await. tune may set more.
func startAwaitServer(t *testing.T, h http.HandlerFunc, tune func(*Server)) (*Server, *tapListener) {
	t.Helper()
	s := &Server{Handler: h, HangupAfter: time.Hour, ErrorLog: log.New(&osbtest.Buffer{}, "", 0)}
	if tune != nil {
		tune(s)
	}
	ln := &tapListener{Listener: listen(t), conns: make(chan *tapConn, 16)}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() {
		_ = s.Close()
		<-done
	})
	return s, ln
}

// settled waits until no connection of s serves a request: each is
// waiting for one the usual way, or gone. An answer's await wait ends
// before its connection turns idle.
func settled(t *testing.T, s *Server) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		active := false
		s.mu.Lock()
		for c := range s.conns {
			active = active || c.state.Load() == connActive
		}
		s.mu.Unlock()
		if !active {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a connection still serves a request after 10 s")
		}
		time.Sleep(time.Millisecond) // polling a condition, not a race
	}
}

// tries runs try until it reports that the answer it checks took the
// await path, up to five times.
func tries(t *testing.T, try func(t *testing.T) bool) {
	t.Helper()
	for range 5 {
		if try(t) || t.Failed() {
			return
		}
	}
	t.Fatal("no answer in five tries was written by writeAwaiting")
}

// TestServerAwaitPipelined: a request sent while the previous one's
// handler runs is in the socket before the answer's wait begins, and
// raises no readiness in it: the wait's fallback serves it, in order.
func TestServerAwaitPipelined(t *testing.T) {
	tries(t, func(t *testing.T) bool {
		entered, release, release2 := make(chan struct{}), make(chan struct{}), make(chan struct{})
		s, ln := startAwaitServer(t, func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/first":
				close(entered)
				<-release
			case "/second":
				<-release2
			}
			describe(w, r)
		}, nil)
		conn := dial(t, s.addr(ln))
		defer conn.Close()
		tc := await(t, ln.conns, "connection")
		if _, err := io.WriteString(conn, at("/first")); err != nil {
			t.Fatal(err)
		}
		await(t, entered, "first handler")
		if _, err := io.WriteString(conn, at("/second")); err != nil {
			t.Fatal(err)
		}
		close(release)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		br := bufio.NewReader(conn)
		first := readAnswers(br, 1, http.MethodGet, false)
		awaited := tc.writes.Load() == 0
		close(release2)
		second := readAnswers(br, 1, http.MethodGet, false)
		if len(first.Answers) != 1 || !strings.Contains(first.Answers[0].Body, `"RequestURI":"/first"`) ||
			len(second.Answers) != 1 || !strings.Contains(second.Answers[0].Body, `"RequestURI":"/second"`) {
			t.Fatalf("answers %+v then %+v, want /first's then /second's", first, second)
		}
		return awaited
	})
}

// TestServerAwaitHalfClose: a client that sent its request and closed its
// side while the handler ran (its end raises no readiness in the wait):
// the answer comes, then the connection's end.
func TestServerAwaitHalfClose(t *testing.T) {
	tries(t, func(t *testing.T) bool {
		entered, release := make(chan struct{}), make(chan struct{})
		s, ln := startAwaitServer(t, func(w http.ResponseWriter, r *http.Request) {
			close(entered)
			<-release
			describe(w, r)
		}, nil)
		conn := dial(t, s.addr(ln))
		defer conn.Close()
		tc := await(t, ln.conns, "connection")
		if _, err := io.WriteString(conn, get); err != nil {
			t.Fatal(err)
		}
		await(t, entered, "handler")
		if err := conn.CloseWrite(); err != nil {
			t.Fatal(err)
		}
		close(release)
		br := bufio.NewReader(conn)
		x := readAnswers(br, 1, http.MethodGet, false)
		if len(x.Answers) != 1 || !strings.Contains(x.Answers[0].Body, `"RequestURI":"/v2/catalog"`) {
			t.Fatalf("answers %+v, want the request's", x)
		}
		awaited := tc.writes.Load() == 0
		awaitEnd(t, conn, br)
		return awaited
	})
}

// awaitTimeouts are the server configurations the keep-alive tests run
// with: the wait after writeAwaiting's must not keep its short deadline.
var awaitTimeouts = []struct {
	name string
	tune func(*Server)
}{
	{"no timeouts", nil},
	{"IdleTimeout", func(s *Server) { s.IdleTimeout = time.Hour }},
	{"ReadTimeout", func(s *Server) { s.ReadTimeout = time.Hour }},
	{"ReadHeaderTimeout", func(s *Server) { s.ReadHeaderTimeout = time.Hour }},
}

// TestServerAwaitKeepAlive: a client that sends each request once it has
// the previous answer is served, many times over one connection.
func TestServerAwaitKeepAlive(t *testing.T) {
	const n = 200
	for _, tt := range awaitTimeouts {
		t.Run(tt.name, func(t *testing.T) {
			s, ln := startAwaitServer(t, describe, tt.tune)
			conn := dial(t, s.addr(ln))
			defer conn.Close()
			tc := await(t, ln.conns, "connection")
			br := bufio.NewReader(conn)
			for i := range n {
				target := "/v2/catalog?i=" + strconv.Itoa(i)
				if _, err := io.WriteString(conn, at(target)); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				x := readAnswers(br, 1, http.MethodGet, false)
				if len(x.Answers) != 1 || x.Answers[0].Close || !strings.Contains(x.Answers[0].Body, `"RequestURI":"`+target+`"`) {
					t.Fatalf("request %d: %+v, want its answer, the connection kept", i, x)
				}
			}
			if w := tc.writes.Load(); w == n {
				t.Errorf("all %d answers went through net.Conn's Write, want writeAwaiting's", n)
			}
		})
	}
}

// TestServerAwaitIdlePastFallback: a client whose next request comes
// after the wait's awaitFallback deadline passed is served.
func TestServerAwaitIdlePastFallback(t *testing.T) {
	for _, tt := range awaitTimeouts {
		t.Run(tt.name, func(t *testing.T) {
			s, ln := startAwaitServer(t, describe, tt.tune)
			conn := dial(t, s.addr(ln))
			defer conn.Close()
			await(t, ln.conns, "connection")
			br := bufio.NewReader(conn)
			for i := range 3 {
				if _, err := io.WriteString(conn, get); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				x := readAnswers(br, 1, http.MethodGet, false)
				if len(x.Answers) != 1 || x.Answers[0].Close || !strings.Contains(x.Answers[0].Body, `"RequestURI":"/v2/catalog"`) {
					t.Fatalf("request %d: %+v, want its answer, the connection kept", i, x)
				}
				settled(t, s) // the answer's wait is over
			}
		})
	}
}

// TestServerAwaitBodyAfterFallback: a request that came within the
// answer's wait, and whose body comes after the wait's awaitFallback
// deadline: the handler reads it whole (the deadline is the wait's only).
func TestServerAwaitBodyAfterFallback(t *testing.T) {
	const size = 100 << 10
	for _, tt := range awaitTimeouts {
		t.Run(tt.name, func(t *testing.T) {
			partial := make(chan struct{}, 1)
			s, ln := startAwaitServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodPut {
					describe(w, r)
					return
				}
				n, err := io.ReadFull(r.Body, make([]byte, 1000))
				partial <- struct{}{}
				if err == nil {
					var m int64
					m, err = io.Copy(io.Discard, r.Body)
					n += int(m)
				}
				_, _ = io.WriteString(w, strconv.Itoa(n)+" "+strconv.FormatBool(err == nil))
			}, tt.tune)
			conn := dial(t, s.addr(ln))
			defer conn.Close()
			await(t, ln.conns, "connection")
			br := bufio.NewReader(conn)
			for i := range 2 {
				if _, err := io.WriteString(conn, get); err != nil {
					t.Fatal(err)
				}
				if x := readAnswers(br, 1, http.MethodGet, false); len(x.Answers) != 1 || x.Answers[0].Close {
					t.Fatalf("GET: %+v, want an answer that keeps the connection", x)
				}
				if _, err := io.WriteString(conn, "PUT /v2/service_instances/i1 HTTP/1.1\r\nHost: gw\r\nContent-Length: "+
					strconv.Itoa(size)+"\r\n\r\n"+strings.Repeat("a", 1000)); err != nil {
					t.Fatal(err)
				}
				await(t, partial, "the body's first part")
				time.Sleep(2 * awaitFallback) // a lower bound: the wait's deadline has passed
				if _, err := io.WriteString(conn, strings.Repeat("b", size-1000)); err != nil {
					t.Fatal(err)
				}
				x := readAnswers(br, 1, http.MethodPut, false)
				if want := strconv.Itoa(size) + " true"; len(x.Answers) != 1 || x.Answers[0].Body != want {
					t.Fatalf("PUT %d: %+v, want %q", i, x, want)
				}
			}
		})
	}
}

// TestServerAwaitShutdown: Shutdown while a connection waits for its next
// request from within its answer's write: the connection is closed and
// Shutdown returns.
func TestServerAwaitShutdown(t *testing.T) {
	s, ln := startAwaitServer(t, describe, nil)
	conn := dial(t, s.addr(ln))
	defer conn.Close()
	await(t, ln.conns, "connection")
	if _, err := io.WriteString(conn, get); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	if x := readAnswers(br, 1, http.MethodGet, false); len(x.Answers) != 1 || x.Answers[0].Close {
		t.Fatalf("answer %+v, want one that keeps the connection", x)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(ctx) }()
	awaitEnd(t, conn, br)
	if err := await(t, shut, "Shutdown's return"); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func (s *Server) addr(ln *tapListener) string { return ln.Addr().String() }

// TestServerAwaitRequestAfterWatch: a request with a body that ran long
// enough for the watch to start; its end interrupts the watch with a past
// read deadline, which the wait for the next request must not keep (with
// no IdleTimeout, it set none: the connection closed at once).
func TestServerAwaitRequestAfterWatch(t *testing.T) {
	for _, tt := range awaitTimeouts {
		t.Run(tt.name, func(t *testing.T) {
			s, ln := startAwaitServer(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost {
					_, _ = io.ReadAll(r.Body)
					if !watchState(w, func(c *serverConn) bool { return c.watch == watchReading }) {
						panic("the watch did not start")
					}
				}
				describe(w, r)
			}, func(s *Server) {
				if tt.tune != nil {
					tt.tune(s)
				}
				s.HangupAfter = time.Millisecond
			})
			conn := dial(t, s.addr(ln))
			defer conn.Close()
			br := bufio.NewReader(conn)
			if _, err := io.WriteString(conn, post); err != nil {
				t.Fatal(err)
			}
			if x := readAnswers(br, 1, http.MethodPost, false); len(x.Answers) != 1 || x.Answers[0].Close {
				t.Fatalf("POST: %+v, want an answer that keeps the connection", x)
			}
			if _, err := io.WriteString(conn, get); err != nil {
				t.Fatal(err)
			}
			if x := readAnswers(br, 1, http.MethodGet, false); len(x.Answers) != 1 || !strings.Contains(x.Answers[0].Body, `"RequestURI":"/v2/catalog"`) {
				t.Fatalf("GET after it: %+v, want its answer", x)
			}
		})
	}
}
