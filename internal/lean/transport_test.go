package lean

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBodies(t *testing.T) {
	tests := []struct {
		name     string
		answer   string
		method   string
		body     string
		trailer  http.Header
		accepted int32 // after two calls
	}{
		{"content length", okAnswer, "GET", "ok", nil, 1},
		{"chunked with a trailer", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\nX-Sum: 5\r\n\r\n", "GET", "abcde", http.Header{"X-Sum": {"5"}}, 1},
		{"close-delimited", "HTTP/1.1 200 OK\r\n\r\nuntil the end", "GET", "until the end", nil, 2},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", "GET", "ok", nil, 2},
		{"HTTP/1.0 without keep-alive", "HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", "GET", "ok", nil, 2},
		{"HEAD: no body", "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", "HEAD", "", nil, 1},
		{"204: no body", "HTTP/1.1 204 No Content\r\n\r\n", "GET", "", nil, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
				for readRequest(br) {
					if _, err := io.WriteString(c, tc.answer); err != nil || strings.Contains(tc.answer, "close") || !strings.Contains(tc.answer, "Length") && !strings.Contains(tc.answer, "chunked") && tc.method != "HEAD" && !strings.HasPrefix(tc.answer, "HTTP/1.1 204") {
						return // the end of the body is the end of the connection
					}
				}
			})
			tr := &Transport{}
			for i := range 2 {
				res, body, err := call(t, tr, tc.method, b.url())
				if err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
				if body != tc.body {
					t.Errorf("call %d: body %q, want %q", i, body, tc.body)
				}
				if diff := cmp.Diff(tc.trailer, res.Trailer, cmp.FilterPath(func(cmp.Path) bool { return tc.trailer == nil }, cmp.Ignore())); diff != "" {
					t.Errorf("trailer (-want +got):\n%s", diff)
				}
			}
			if got := b.accepted.Load(); got != tc.accepted {
				t.Errorf("broker accepted %d connections for two calls, want %d", got, tc.accepted)
			}
		})
	}
}

// TestBrokerClosesMidAnswer: a body cut short is an error, and its
// connection is not used again.
func TestBrokerClosesMidAnswer(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n",
		"HTTP/1.1 200 OK\r\nContent-Le",
	} {
		b := newBroker(t, answerOnce(answer), answerEach(okAnswer))
		tr := &Transport{}
		_, _, err := call(t, tr, "GET", b.url())
		if err == nil {
			t.Errorf("%q: no error", answer)
		}
		if _, body, err := call(t, tr, "GET", b.url()); err != nil || body != "ok" || b.accepted.Load() != 2 {
			t.Errorf("%q: next call %q, %v on connection %d; want ok on a new one", answer, body, err, b.accepted.Load())
		}
	}
}

// TestSlowlorisBroker: a broker that sends its header a byte at a time and
// never finishes is cut off by ResponseHeaderTimeout, one that trickles
// its body by the call's deadline.
func TestSlowlorisBroker(t *testing.T) {
	slow := func(prefix string) func(net.Conn, *bufio.Reader) {
		return func(c net.Conn, br *bufio.Reader) {
			readRequest(br)
			_, _ = io.WriteString(c, prefix)
			for {
				if _, err := io.WriteString(c, "x"); err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	t.Run("header", func(t *testing.T) {
		b := newBroker(t, slow("HTTP/1.1 200 OK\r\nX-Slow: "))
		_, _, err := call(t, &Transport{ResponseHeaderTimeout: 100 * time.Millisecond}, "GET", b.url())
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			t.Errorf("error %v, want a timeout", err)
		}
	})
	t.Run("body", func(t *testing.T) {
		b := newBroker(t, slow("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n"))
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _, err := callCtx(t, ctx, &Transport{}, "GET", b.url())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want the call's deadline", err)
		}
	})
}

// TestInformationalAnswers: 1xx answers are skipped and passed to the
// trace; the final answer is the call's.
func TestInformationalAnswers(t *testing.T) {
	b := newBroker(t, answerEach("HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n"+okAnswer))
	var got []int
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, _ textproto.MIMEHeader) error { got = append(got, code); return nil },
	})
	tr := &Transport{}
	for range 2 {
		res, body, err := callCtx(t, ctx, tr, "GET", b.url())
		if err != nil || res.StatusCode != 200 || body != "ok" {
			t.Fatalf("got %v %q %v, want 200 ok", res, body, err)
		}
	}
	if diff := cmp.Diff([]int{103, 100, 103, 100}, got); diff != "" {
		t.Errorf("1xx answers seen (-want +got):\n%s", diff)
	}
	if n := b.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestReuse: answers read to the end leave their connection to the next
// call, LIFO; an answer closed unread closes its connection.
func TestReuse(t *testing.T) {
	b := newBroker(t, answerEach(okAnswer))
	tr := &Transport{}
	for i := range 5 {
		if _, body, err := call(t, tr, "GET", b.url()); err != nil || body != "ok" {
			t.Fatalf("call %d: %q %v", i, body, err)
		}
	}
	if n := b.accepted.Load(); n != 1 {
		t.Fatalf("five calls in a row on %d connections, want 1", n)
	}
	req, _ := http.NewRequest("GET", b.url(), nil)
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close() // unread
	if n := tr.idleConns(poolKey{host: b.ln.Addr().String()}); n != 0 {
		t.Errorf("%d idle connections after an unread body, want 0", n)
	}
	if _, _, err := call(t, tr, "GET", b.url()); err != nil || b.accepted.Load() != 2 {
		t.Errorf("after an unread body: %v on connection %d, want a new one", err, b.accepted.Load())
	}
}

// TestPoolBound: no more than MaxIdleConns stay idle.
func TestPoolBound(t *testing.T) {
	b := newBroker(t, answerEach(okAnswer))
	tr := &Transport{MaxIdleConns: 1}
	var open []*http.Response
	for range 3 { // three answers held at once: three connections
		req, _ := http.NewRequest("GET", b.url(), nil)
		res, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, res)
	}
	for _, res := range open {
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	if n := tr.idleConns(poolKey{host: b.ln.Addr().String()}); n != 1 {
		t.Errorf("%d idle connections, want 1", n)
	}
}

// TestIdleTimeout: a connection idle past IdleConnTimeout is closed, not
// used.
func TestIdleTimeout(t *testing.T) {
	closed := make(chan struct{})
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		answerEach(okAnswer)(c, br)
		close(closed)
	}, answerEach(okAnswer))
	now := time.Unix(1000, 0)
	tr := &Transport{IdleConnTimeout: time.Hour, now: func() time.Time { return now }}
	if _, _, err := call(t, tr, "GET", b.url()); err != nil {
		t.Fatal(err)
	}
	now = now.Add(time.Hour + time.Second)
	if _, _, err := call(t, tr, "GET", b.url()); err != nil {
		t.Fatal(err)
	}
	if n := b.accepted.Load(); n != 2 {
		t.Errorf("%d connections, want a new one after the idle timeout", n)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Error("the expired connection was not closed")
	}
}

// TestIdleClosedRetry: a broker that closed a keep-alive connection while
// it was idle. A replayable call on it is sent again on a new connection;
// one that is not is never sent on it (the idle connection is probed).
// A call the broker took and then hung up on is not sent again unless it
// is replayable.
func TestIdleClosedRetry(t *testing.T) {
	t.Run("closed while idle", func(t *testing.T) {
		for _, method := range []string{"GET", "PUT", "DELETE", "PATCH"} {
			gone := make(chan struct{})
			b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
				answerOnce(okAnswer)(c, br)
				c.Close()
				close(gone)
			}, answerEach(okAnswer))
			tr := &Transport{}
			if _, _, err := call(t, tr, "GET", b.url()); err != nil {
				t.Fatal(err)
			}
			<-gone
			if _, body, err := call(t, tr, method, b.url()); err != nil || body != "ok" {
				t.Errorf("%s on a connection closed while idle: %q %v, want ok", method, body, err)
			}
			if n := b.accepted.Load(); n != 2 {
				t.Errorf("%s: %d connections, want 2", method, n)
			}
		}
	})
	t.Run("closed after the request", func(t *testing.T) {
		for _, tc := range []struct {
			method string
			retry  bool
		}{{"GET", true}, {"HEAD", true}, {"PUT", false}, {"POST", false}} {
			b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
				answerOnce(okAnswer)(c, br)
				readRequest(br) // and hangs up without an answer
			}, answerEach(okAnswer))
			tr := &Transport{}
			if _, _, err := call(t, tr, "GET", b.url()); err != nil {
				t.Fatal(err)
			}
			_, _, err := call(t, tr, tc.method, b.url())
			if (err == nil) != tc.retry {
				t.Errorf("%s: error %v, want retried %v", tc.method, err, tc.retry)
			}
			if want := map[bool]int32{true: 2, false: 1}[tc.retry]; b.accepted.Load() != want {
				t.Errorf("%s: %d connections, want %d", tc.method, b.accepted.Load(), want)
			}
		}
	})
}

// TestCancelClosesConnection: a caller that goes away (the platform hung
// up) cancels the call, and the broker sees its connection closed.
func TestCancelClosesConnection(t *testing.T) {
	got, hungUp := make(chan struct{}), make(chan struct{})
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		close(got)
		if _, err := br.ReadByte(); err != nil { // blocks until the gateway closes
			close(hungUp)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := callCtx(t, ctx, &Transport{}, "GET", b.url())
		errc <- err
	}()
	<-got
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	select {
	case <-hungUp:
	case <-time.After(10 * time.Second):
		t.Error("the broker's connection stayed open after the call was canceled")
	}
}

// TestProtocolSwitch: a 101 answer hands the connection over as the body.
func TestProtocolSwitch(t *testing.T) {
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		_, _ = io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\nhi")
		_, _ = io.Copy(c, br)
	})
	req, _ := http.NewRequest("GET", b.url(), nil)
	res, err := (&Transport{}).RoundTrip(req)
	if err != nil || res.StatusCode != 101 {
		t.Fatalf("%v %v", res, err)
	}
	rw := res.Body.(io.ReadWriteCloser)
	defer rw.Close()
	_, _ = io.WriteString(rw, "!")
	buf := make([]byte, 3)
	if _, err := io.ReadFull(rw, buf); err != nil || string(buf) != "hi!" {
		t.Errorf("read %q %v, want hi!", buf, err)
	}
}
