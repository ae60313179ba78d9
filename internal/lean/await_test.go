package lean

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The transport's writeAwaiting: the last of a request written from within
// the wait for the answer. Whether a call took that path is seen on the
// wire's side of the connection, without a hook: a tapConn counts the
// writes that go through net.Conn's Write, and writeAwaiting's raw write
// (syscall.Write from within RawConn.Read) does not.

// tapConn is a TCP connection that counts what goes through its Write and
// records its read deadlines. It embeds *net.TCPConn, so SyscallConn,
// CloseWrite and the deadlines' effect pass through.
type tapConn struct {
	*net.TCPConn
	writes  atomic.Int32 // Write calls
	written atomic.Int64 // bytes through Write

	mu            sync.Mutex
	readDeadlines []time.Time // SetReadDeadline's, in order
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	n, err := c.TCPConn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c *tapConn) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	c.readDeadlines = append(c.readDeadlines, t)
	c.mu.Unlock()
	return c.TCPConn.SetReadDeadline(t)
}

// deadlines returns the read deadlines set so far.
func (c *tapConn) deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.readDeadlines...)
}

// tapDialer dials tapConns and keeps them, in order.
type tapDialer struct {
	mu    sync.Mutex
	conns []*tapConn
}

func (d *tapDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	nc, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	c := &tapConn{TCPConn: nc.(*net.TCPConn)}
	d.mu.Lock()
	d.conns = append(d.conns, c)
	d.mu.Unlock()
	return c, nil
}

// conn returns the i-th connection dialed.
func (d *tapDialer) conn(t *testing.T, i int) *tapConn {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if i >= len(d.conns) {
		t.Fatalf("connection %d was not dialed (%d were)", i, len(d.conns))
	}
	return d.conns[i]
}

func (d *tapDialer) dialed() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

// callBody sends method url with body and reads the whole answer.
func callBody(t *testing.T, tr http.RoundTripper, method, url, body string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestAwaitFreshAndReused: a call on a new connection and calls on it
// reused shortly after are written by writeAwaiting (nothing goes through
// net.Conn's Write), with or without a small body, and get their answers.
func TestAwaitFreshAndReused(t *testing.T) {
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(req.Body)
			answer := req.Method + " " + string(body)
			if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(answer))+"\r\n\r\n"+answer); err != nil {
				return
			}
		}
	})
	d := &tapDialer{}
	tr := &Transport{DialContext: d.dial}
	for i, tc := range []struct{ method, body string }{
		{"GET", ""}, {"GET", ""}, {"PUT", `{"service_id":"s1"}`}, {"DELETE", ""},
	} {
		got, err := callBody(t, tr, tc.method, b.url(), tc.body)
		if want := tc.method + " " + tc.body; err != nil || got != want {
			t.Fatalf("call %d: %q %v, want %q", i, got, err, want)
		}
		if n := d.conn(t, 0).writes.Load(); n != 0 {
			t.Fatalf("call %d: %d writes through net.Conn, want the request written by writeAwaiting", i, n)
		}
	}
	if n := b.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestAwaitIdleMax: a connection reused after awaitIdleMax or more idle
// (the broker may have closed it) is written the usual way; just under
// it, by writeAwaiting.
func TestAwaitIdleMax(t *testing.T) {
	b := newBroker(t, answerEach(okAnswer))
	d := &tapDialer{}
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	tr := &Transport{DialContext: d.dial, now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }}
	pass := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	for i, tc := range []struct {
		idle  time.Duration
		await bool
	}{
		{0, true}, // a new connection
		{awaitIdleMax - time.Millisecond, true},
		{awaitIdleMax, false},
		{time.Hour, false},
		{0, true},
	} {
		pass(tc.idle)
		before := d.conn0Writes()
		if _, body, err := call(t, tr, "GET", b.url()); err != nil || body != "ok" {
			t.Fatalf("call %d: %q %v, want ok", i, body, err)
		}
		if awaited := d.conn(t, 0).writes.Load() == before; awaited != tc.await {
			t.Errorf("call %d, idle %v: written by writeAwaiting %v, want %v", i, tc.idle, awaited, tc.await)
		}
	}
	if n := b.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// conn0Writes is the first connection's writes so far, 0 before it is dialed.
func (d *tapDialer) conn0Writes() int32 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.conns) == 0 {
		return 0
	}
	return d.conns[0].writes.Load()
}

// TestAwaitNotOverTLS: a TLS connection's request goes through tls.Conn
// (writeAwaiting would write it in the clear), new or reused.
func TestAwaitNotOverTLS(t *testing.T) {
	ca := osbtest.NewCA("test CA")
	cert := ca.Issue(osbtest.CertSpec{IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}).TLS
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	d := &tapDialer{}
	tr := &Transport{DialContext: d.dial, TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}
	defer tr.CloseIdleConnections()
	for i := range 3 {
		before := d.conn0Writes()
		if _, body, err := call(t, tr, "GET", srv.URL+"/v2/catalog"); err != nil || body != "ok" {
			t.Fatalf("call %d: %q %v, want ok", i, body, err)
		}
		if d.conn(t, 0).writes.Load() == before {
			t.Errorf("call %d: nothing went through tls.Conn", i)
		}
	}
	if n := d.dialed(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// TestAwaitNotAfterPartialWrite: a request larger than the 4 kB writer
// has written some of itself before the final flush (nwrite > 0): the
// broker may answer early, so the flush is written the usual way. A
// broker that answers after the first part of the body and reads the
// rest after: the call gets the answer, and the connection the next call.
func TestAwaitNotAfterPartialWrite(t *testing.T) {
	const size = 64 << 10
	received := make(chan int64, 1) // bytes of the large request
	b := newBroker(t, func(c net.Conn, _ *bufio.Reader) {
		cr := &countReader{r: c}
		br := bufio.NewReader(cr)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		if _, err := io.ReadFull(req.Body, make([]byte, 1000)); err != nil {
			return
		}
		if _, err := io.WriteString(c, "HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\nearly"); err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, req.Body)
		received <- cr.n.Load() - int64(br.Buffered())
		answerEach(okAnswer)(c, br)
	})
	d := &tapDialer{}
	tr := &Transport{DialContext: d.dial}
	req, err := http.NewRequest("PUT", b.url(), strings.NewReader(strings.Repeat("b", size)))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil || res.StatusCode != 201 || string(body) != "early" {
		t.Fatalf("got %d %q %v, want 201 early", res.StatusCode, body, err)
	}
	c := d.conn(t, 0)
	if got, want := c.written.Load(), await(t, received, "the broker's count"); got != want {
		t.Errorf("%d bytes through net.Conn's Write of the %d of the request, want all", got, want)
	}
	before := c.writes.Load()
	if _, body, err := call(t, tr, "GET", b.url()); err != nil || body != "ok" {
		t.Fatalf("next call: %q %v, want ok", body, err)
	}
	if c.writes.Load() != before {
		t.Error("the next call (a GET) was not written by writeAwaiting")
	}
	if n := b.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}

// countReader counts the bytes read through it.
type countReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// TestAwaitIdleClosed: a broker that closed a pooled connection right
// after its answer (without Connection: close). The next GET, written by
// writeAwaiting on the dead connection, wakes on the broker's reset
// instead of waiting, and is sent again on a new connection.
func TestAwaitIdleClosed(t *testing.T) {
	for _, waitClose := range []bool{true, false} {
		t.Run("closed before the next call "+strconv.FormatBool(waitClose), func(t *testing.T) {
			gone := make(chan struct{})
			b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
				answerOnce(okAnswer)(c, br)
				c.Close()
				close(gone)
			}, answerEach(okAnswer))
			d := &tapDialer{}
			tr := &Transport{DialContext: d.dial}
			for i := range 3 {
				if waitClose && i == 1 {
					<-gone
				}
				errc := make(chan error, 1)
				go func() {
					_, body, err := call(t, tr, "GET", b.url())
					if err == nil && body != "ok" {
						err = errors.New("body " + strconv.Quote(body))
					}
					errc <- err
				}()
				if err := await(t, errc, "answer"); err != nil {
					t.Fatalf("call %d: %v", i, err)
				}
			}
			if waitClose {
				if n := b.accepted.Load(); n != 2 {
					t.Errorf("%d connections, want 2", n)
				}
				if n := d.conn(t, 0).writes.Load(); n != 0 {
					t.Errorf("%d writes through net.Conn on the first connection, want both calls written by writeAwaiting", n)
				}
			}
		})
	}
}

// silentBroker reads a request and never answers; got is closed once
// it read it.
func silentBroker(t *testing.T) (*broker, chan struct{}) {
	got := make(chan struct{})
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		readRequest(br)
		close(got)
		_, _ = br.ReadByte() // until the gateway closes
	})
	return b, got
}

// TestAwaitHeaderTimeout: a broker that never answers. The call, parked in
// writeAwaiting's wait, ends with the header timeout, counted from the
// request's write once: no later read deadline extends it.
func TestAwaitHeaderTimeout(t *testing.T) {
	b, _ := silentBroker(t)
	d := &tapDialer{}
	tr := &Transport{DialContext: d.dial, ResponseHeaderTimeout: 50 * time.Millisecond}
	errc := make(chan error, 1)
	go func() {
		_, _, err := call(t, tr, "GET", b.url())
		errc <- err
	}()
	err := await(t, errc, "the call's end")
	if !errors.As(err, new(headerTimeout)) {
		t.Fatalf("error %v, want the header timeout", err)
	}
	c := d.conn(t, 0)
	if n := c.writes.Load(); n != 0 {
		t.Errorf("%d writes through net.Conn, want the request written by writeAwaiting", n)
	}
	var set []time.Time
	for _, dl := range c.deadlines() {
		if !dl.IsZero() {
			set = append(set, dl)
		}
	}
	for _, dl := range set[min(1, len(set)):] {
		if dl.After(set[0]) {
			t.Errorf("read deadlines %v: the header's deadline was moved later after the wait", set)
			break
		}
	}
}

// TestAwaitCancel: canceling the call's context while it is parked in
// writeAwaiting's wait ends it with the context's error, whether or not
// ResponseHeaderTimeout is set (its deadline must not replace the
// interrupt's).
func TestAwaitCancel(t *testing.T) {
	for _, rht := range []time.Duration{0, time.Hour} {
		t.Run("ResponseHeaderTimeout "+rht.String(), func(t *testing.T) {
			b, got := silentBroker(t)
			d := &tapDialer{}
			tr := &Transport{DialContext: d.dial, ResponseHeaderTimeout: rht}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, _, err := callCtx(t, ctx, tr, "GET", b.url())
				errc <- err
			}()
			await(t, got, "the broker's read of the request")
			cancel()
			if err := await(t, errc, "the call's end"); !errors.Is(err, context.Canceled) {
				t.Errorf("error %v, want context.Canceled", err)
			}
			if n := d.conn(t, 0).writes.Load(); n != 0 {
				t.Errorf("%d writes through net.Conn, want the request written by writeAwaiting", n)
			}
		})
	}
}
