package lean

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Server serves HTTP/1.x on the connections of a listener, in the place
// of net/http's server for the gateway's plain-HTTP listener
// (listen.server: lean). One goroutine per connection reads a request,
// runs the handler and writes the answer, as net/http's does; what it
// leaves out is what each request costs there beyond that:
//
//   - net/http starts a goroutine per request to watch the connection
//     for the client hanging up (a read that fails with EAGAIN at once,
//     then a wake-up and a hand-off to end it). Here a request is watched
//     only once it has run for HangupAfter (10 ms): a call answered
//     sooner needs no watch, and a client that hangs up (a reset) during
//     a longer one still cancels the request's context, at most
//     HangupAfter late. A half-close (EOF) does not: unlike net/http,
//     whose background read cancels on any failed read, the client
//     still reads the answer (RFC 9112 §9.6).
//   - net/http sets six deadlines per request; here three (idle, header,
//     write).
//   - The request's head is parsed in one pass from the reader's buffer
//     (one string for all its values, interned common field names); the
//     answer's head is written in one pass from the header map, without
//     a copy of the map.
//
// Measured with bench/extbench (one run of five rounds, the gateway on
// each server in the same run): 30.9 µs of CPU per proxied request
// against 40.2 on net/http's server (0.77×), 1.30× against 1.06× the
// bare proxy's requests (a session earlier, before writeAwaiting and the
// raw system calls: 30.3 against 35.5 µs, 0.85×).
//
// It speaks HTTP/1.0 and 1.1 over plain TCP only (no TLS: the gateway
// serves a TLS listener with net/http, which also speaks HTTP/2), has no
// protocol upgrades (its ResponseWriter is no http.Hijacker), and refuses
// what an OSB gateway has no use for: CONNECT, folded header lines,
// transfer codings other than chunked. Every refusal is an OSB error
// (JSON with a description) and closes the connection.
//
// A differential test (server_test.go, FuzzServerRequest) holds it to
// net/http's server: the handler sees the same request, the client the
// same answer. Where they differ, by design:
//
//   - Refused here, served there: folded header lines, Transfer-Encoding
//     with Content-Length, Transfer-Encoding on HTTP/1.0 (each makes a
//     request's length ambiguous), and CONNECT.
//   - Refusals are JSON (net/http's are text), with Connection: close.
//   - No 1xx answer goes to an HTTP/1.0 client (RFC 9110 §15.2).
//   - OPTIONS * goes to the handler (net/http answers it itself unless
//     DisableGeneralOptionsHandler).
//   - A chunked body's trailer is read and dropped: Request.Trailer
//     stays nil.
//   - A request that expected 100 Continue and whose body the handler
//     did not read closes the connection after the answer at once;
//     net/http reads the body first.
//   - An unread body is drained after the answer is sent (net/http
//     drains it before the answer's head goes).
type Server struct {
	Handler http.Handler

	// ReadHeaderTimeout bounds the reading of a request's head (0:
	// ReadTimeout); ReadTimeout the whole request, body included;
	// WriteTimeout the time from the head read to the answer written;
	// IdleTimeout the wait for the next request on a kept-alive
	// connection (0: ReadTimeout). Zero: none.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration

	// MaxHeaderBytes limits a request's head (0: http.DefaultMaxHeaderBytes).
	MaxHeaderBytes int

	// ErrorLog receives accept errors and handler panics (nil: the log
	// package's standard logger).
	ErrorLog *log.Logger

	// HangupAfter is how long a request runs before its connection is
	// watched for the client going away (0: DefaultHangupAfter).
	HangupAfter time.Duration

	mu        sync.Mutex
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
	closing   atomic.Bool
	connsDone chan struct{} // closed when the last conn ends during shutdown
}

// DefaultHangupAfter is Server.HangupAfter's default.
const DefaultHangupAfter = 10 * time.Millisecond

// ErrServerClosed is what Serve returns after Shutdown or Close: the
// standard library's, so that callers need not know which server ran.
var ErrServerClosed = http.ErrServerClosed

// Serve accepts connections on ln and serves each in a goroutine of its
// own, until Shutdown or Close; it closes ln when it returns.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln, true) {
		ln.Close()
		return ErrServerClosed
	}
	defer s.track(ln, false)
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.closing.Load() {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || isTemporary(err) {
				backoff = max(5*time.Millisecond, min(2*backoff, time.Second))
				s.logf("lean server: accept error: %v; retrying in %v", err, backoff)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		c := s.newConn(nc)
		if c == nil {
			nc.Close()
			continue
		}
		go c.serve()
	}
}

// isTemporary reports whether an accept error is worth waiting out (too
// many open files, and the like).
func isTemporary(err error) bool {
	var t interface{ Temporary() bool }
	return errors.As(err, &t) && t.Temporary()
}

func (s *Server) track(ln net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if add {
		if s.closing.Load() {
			return false
		}
		if s.listeners == nil {
			s.listeners = make(map[net.Listener]struct{})
		}
		s.listeners[ln] = struct{}{}
		return true
	}
	if _, ok := s.listeners[ln]; ok {
		delete(s.listeners, ln)
		ln.Close()
	}
	return true
}

func (s *Server) newConn(nc net.Conn) *serverConn {
	c := &serverConn{s: s, nc: nc, remote: nc.RemoteAddr().String()}
	c.state.Store(connNew)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return nil
	}
	if s.conns == nil {
		s.conns = make(map[*serverConn]struct{})
	}
	s.conns[c] = struct{}{}
	return c
}

func (s *Server) forget(c *serverConn) {
	s.mu.Lock()
	delete(s.conns, c)
	if len(s.conns) == 0 && s.connsDone != nil {
		close(s.connsDone)
		s.connsDone = nil
	}
	s.mu.Unlock()
}

// Shutdown stops accepting, closes idle connections at once and every
// other one when its request is answered, and returns when none is left
// or ctx ends (then with ctx's error, the connections left as they are:
// Close cuts them).
func (s *Server) Shutdown(ctx context.Context) error {
	s.closing.Store(true)
	s.mu.Lock()
	for ln := range s.listeners {
		ln.Close()
		delete(s.listeners, ln)
	}
	var done chan struct{}
	if len(s.conns) > 0 {
		if s.connsDone == nil {
			s.connsDone = make(chan struct{})
		}
		done = s.connsDone
	}
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	// Connections idle now are closed here; one that ends its request
	// later sees closing and closes itself. A connection between the two
	// (a new one not yet reading) is closed at the next tick.
	tick := time.NewTimer(0)
	defer tick.Stop()
	wait := time.Millisecond
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			s.closeIdle()
			tick.Reset(wait)
			wait = min(2*wait, 500*time.Millisecond)
		}
	}
}

func (s *Server) closeIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		if c.state.Load() == connIdle {
			c.nc.Close()
		}
	}
}

// Close closes the listeners and every connection at once.
func (s *Server) Close() error {
	s.closing.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	for ln := range s.listeners {
		ln.Close()
		delete(s.listeners, ln)
	}
	for c := range s.conns {
		c.nc.Close()
	}
	return nil
}

func (s *Server) logf(format string, args ...any) {
	if s.ErrorLog != nil {
		s.ErrorLog.Printf(format, args...)
	} else {
		log.Printf(format, args...)
	}
}

func (s *Server) maxHeaderBytes() int {
	return cmp.Or(max(s.MaxHeaderBytes, 0), http.DefaultMaxHeaderBytes)
}

func (s *Server) headerTimeout() time.Duration { return cmp.Or(s.ReadHeaderTimeout, s.ReadTimeout) }

func (s *Server) idleTimeout() time.Duration { return cmp.Or(s.IdleTimeout, s.ReadTimeout) }

func (s *Server) hangupAfter() time.Duration { return cmp.Or(s.HangupAfter, DefaultHangupAfter) }

// Connection states, for Shutdown.
const (
	connNew    int32 = iota // accepted, no request read yet
	connIdle                // waiting for a request after an answer
	connActive              // reading a request or serving it
)

// Watch states of a connection's request (serverConn.watch).
const (
	watchOff      = iota // no request to watch, or its body is unread
	watchArmed           // the timer may start a watch
	watchReading         // a watch reads the connection
	watchFinished        // the watch ended
)

// serverConn is one connection and its loop.
type serverConn struct {
	s      *Server
	nc     net.Conn
	remote string
	state  atomic.Int32

	br *bufio.Reader
	bw *bufio.Writer

	base context.Context // carries http.LocalAddrContextKey

	// The watch of the running request: the timer starts it after
	// HangupAfter; it reads one byte from nc.
	mu         sync.Mutex
	cond       sync.Cond
	watch      int
	timer      *time.Timer
	cancel     context.CancelCauseFunc // the running request's
	reqDone    <-chan struct{}         // the running request's context's Done
	reqGen     uint64                  // counts requests: a Canceler or a hook names its request
	hook       func()                  // the transport's interrupt of the running request's broker call
	hookState  int                     // hookNone, hookSet, hookRan
	stash      [1]byte                 // a byte the watch read
	stashed    bool
	hungUp     bool // the watch saw the client go away
	inRequest  bool // a request runs: arm may arm
	linger     bool // close with closeWriteAndWait: the client may still be sending
	afterPOST  bool // the last request was a POST: CR and LF may come before the next (dropPostCRLF)
	interrupts bool // the request's end interrupts the watch

	headBuf, pendBuf []byte // the responses' buffers, reused

	// The wait for the next request from within the answer's last write
	// (writeAwaiting): raw is nc's, nil when it has none.
	raw         syscall.RawConn
	awaitNext   bool // the next Write is the answer's last: await the next request
	awaited     bool // it did, and nc became readable
	awaitStep   func(fd uintptr) bool
	pending     []byte
	written     int
	awaitResult int

	// sock reads nc with raw system calls (raw nil: none).
	sock sockReader
}

// errClientGone is the cause of a request's context when the client hung up.
var errClientGone = errors.New("lean server: the client closed the connection")

// Write is the connection's writer under bw.
func (c *serverConn) Write(p []byte) (int, error) {
	if c.awaitNext {
		c.awaitNext = false
		if n := c.writeAwaiting(p); n > 0 {
			if n == len(p) {
				return n, nil
			}
			m, err := c.nc.Write(p[n:])
			return n + m, err
		}
	}
	return c.nc.Write(p)
}

// awaitFallback bounds writeAwaiting's wait: bytes that came before it
// began (a pipelined request, a half-close) raise no readiness in it.
const awaitFallback = 5 * time.Millisecond

// writeAwaiting writes p, the end of an answer, from within a wait for the
// next request, so that the read of it does not first find nothing.
func (c *serverConn) writeAwaiting(p []byte) int {
	if err := c.nc.SetReadDeadline(time.Now().Add(awaitFallback)); err != nil {
		return 0
	}
	c.pending, c.written, c.awaitResult = p, 0, 0
	err := c.raw.Read(c.awaitStep)
	c.awaited = err == nil && c.awaitResult == 2
	c.pending = nil
	return c.written
}

func (c *serverConn) step(fd uintptr) bool {
	p := c.pending
	if p == nil {
		c.awaitResult = 2
		return true
	}
	c.pending = nil
	n, e := sysWrite(fd, p)
	c.written = n
	return e != 0 || n < len(p)
}

// Read is the connection's reader under br: the watch's byte first.
func (c *serverConn) Read(p []byte) (int, error) {
	if c.stashed && len(p) > 0 {
		c.stashed = false
		p[0] = c.stash[0]
		return 1, nil
	}
	if c.sock.raw != nil {
		return c.sock.Read(p)
	}
	return c.nc.Read(p)
}

func (c *serverConn) serve() {
	s := c.s
	defer func() {
		if v := recover(); v != nil && v != http.ErrAbortHandler {
			buf := make([]byte, 64<<10)
			buf = buf[:runtime.Stack(buf, false)]
			s.logf("lean server: panic serving %v: %v\n%s", c.remote, v, buf)
		}
		if c.timer != nil {
			c.stopWatch()
		}
		if c.linger {
			c.closeWriteAndWait()
		}
		c.nc.Close()
		s.forget(c)
	}()
	c.br = bufio.NewReaderSize(c, 4096)
	c.bw = bufio.NewWriterSize(c, 4096)
	if sc, ok := c.nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	if c.raw != nil {
		c.sock.init(c.nc, c.raw)
	}
	c.awaitStep = c.step
	c.base = context.WithValue(context.Background(), http.LocalAddrContextKey, c.nc.LocalAddr())
	c.base = context.WithValue(c.base, connKey{}, c)
	c.cond.L = &c.mu
	c.timer = time.AfterFunc(time.Hour, c.watchConn) // armed per request (arm)
	c.timer.Stop()
	for {
		if s.closing.Load() && c.br.Buffered() == 0 {
			return
		}
		if !c.awaitRequest() {
			return
		}
		c.state.Store(connActive)
		if !c.serveOne() {
			return
		}
		c.state.Store(connIdle)
	}
}

// awaitRequest waits for a request's first byte, within IdleTimeout
// (none for the first request: ReadHeaderTimeout covers it).
func (c *serverConn) awaitRequest() bool {
	if c.br.Buffered() > 0 || c.stashed {
		return true
	}
	d := c.s.idleTimeout()
	if c.state.Load() == connNew {
		d = c.s.headerTimeout()
	}
	// None when d is 0: clears the deadline of writeAwaiting's wait, or
	// the past one of an interrupted watch.
	var deadline time.Time
	if d > 0 {
		deadline = time.Now().Add(d)
	}
	if c.awaited {
		c.awaited = false
		_, err := c.br.Peek(1)
		if err == nil || !isTimeoutErr(err) {
			_ = c.nc.SetReadDeadline(deadline)
			return err == nil
		}
		// A readiness older than the wait: wait as usual.
	}
	_ = c.nc.SetReadDeadline(deadline)
	_, err := c.br.Peek(1)
	return err == nil
}

// serveOne reads one request and answers it; false: close the connection.
func (c *serverConn) serveOne() bool {
	s := c.s
	t0 := time.Now()
	if d := s.headerTimeout(); d > 0 {
		_ = c.nc.SetReadDeadline(t0.Add(d))
	}
	req, perr := c.readRequest()
	if perr != nil {
		if perr.status != 0 {
			c.refuse(perr)
		}
		return false
	}
	if d := s.ReadTimeout; d > 0 && d != s.headerTimeout() && req.Body != http.NoBody {
		_ = c.nc.SetReadDeadline(t0.Add(d))
	}
	if d := s.WriteTimeout; d > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(d))
	}
	ctx, cancel := context.WithCancelCause(c.base)
	req = req.WithContext(ctx)
	w := c.newResponse(req)
	c.mu.Lock()
	c.cancel, c.reqDone, c.hungUp, c.inRequest = cancel, ctx.Done(), false, true
	c.mu.Unlock()
	b, hasBody := req.Body.(*requestBody)
	if hasBody {
		b.w = w
	} else {
		c.arm()
	}
	// A panic goes up to serve, which logs it and closes the connection.
	s.Handler.ServeHTTP(w, req)
	c.stopWatch()
	c.endRequest()
	w.awaitNext = c.raw != nil && !hasBody && c.br.Buffered() == 0 && !c.stashed && !c.hungUp && !s.closing.Load()
	keep := w.finish()
	c.mu.Lock()
	hungUp := c.hungUp
	c.mu.Unlock()
	// A client gone for reading may have sent more requests first (in
	// one write, then closed its side): they are served, as by net/http.
	if !keep || hungUp && c.br.Buffered() == 0 || s.closing.Load() {
		c.linger = hasBody && !hungUp && b.unfinished()
		return false
	}
	if hasBody && !b.drain() {
		c.linger = true
		return false
	}
	return true
}

// closeWriteAndWait ends the connection's sending side and reads what the
// client still sends, for up to lingerTime, before the close: closing a
// socket with unread bytes resets the connection, and the client could
// lose the answer just written (net/http's closeWriteAndWait).
func (c *serverConn) closeWriteAndWait() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(lingerTime))
	_, _ = io.Copy(io.Discard, io.LimitReader(c.nc, maxDrain))
}

// lingerTime bounds closeWriteAndWait (net/http's rstAvoidanceDelay).
const lingerTime = 500 * time.Millisecond

// arm lets the watch start once the request has run for HangupAfter:
// when it has no body, or its body was read to the end (possibly by
// another goroutine: a transport that sends it on). After the request's
// end (stopWatch) it does nothing.
func (c *serverConn) arm() {
	c.mu.Lock()
	if !c.inRequest || c.watch != watchOff {
		c.mu.Unlock()
		return
	}
	c.watch = watchArmed
	c.mu.Unlock()
	c.timer.Reset(c.s.hangupAfter())
}

// watchConn runs in the timer's goroutine: it reads one byte from the
// connection while the request runs. The client going away (a reset)
// cancels the request's context, its half-close (EOF) does not; a byte (the next request, pipelined)
// is kept for the reader; a deadline (the request's end) ends it.
func (c *serverConn) watchConn() {
	c.mu.Lock()
	if c.watch != watchArmed {
		c.mu.Unlock()
		return
	}
	c.watch = watchReading
	// Under the lock, so that stopWatch's past deadline comes after it.
	_ = c.nc.SetReadDeadline(time.Time{})
	c.mu.Unlock()
	n, err := c.nc.Read(c.stash[:])
	c.mu.Lock()
	if n == 1 {
		c.stashed = true
	} else if err != nil && !c.interrupts && !isTimeoutErr(err) {
		// The client sends no more: the connection closes after the
		// answer. Only a failed read other than EOF (a reset) cancels
		// the request: a client that half-closed its side (EOF, RFC
		// 9112 §9.6) still reads the answer.
		c.hungUp = true
		if c.cancel != nil && err != io.EOF {
			c.cancel(errClientGone)
			if h := c.takeHook(); h != nil {
				defer h()
			}
		}
	}
	// Else a deadline: the request's end (interrupts), or one the handler
	// set (http.ResponseController); the watch ends either way.
	c.watch = watchFinished
	c.cond.Broadcast()
	c.mu.Unlock()
}

func isTimeoutErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// stopWatch ends the request's watch: a watch not started never starts,
// one reading is interrupted and awaited.
func (c *serverConn) stopWatch() {
	c.timer.Stop()
	c.mu.Lock()
	c.inRequest = false
	if c.watch == watchReading {
		c.interrupts = true
		_ = c.nc.SetReadDeadline(aLongTimeAgo)
		for c.watch == watchReading {
			c.cond.Wait()
		}
		c.interrupts = false
	}
	c.watch = watchOff
	c.mu.Unlock()
}

// refuse answers a request the server cannot take with an OSB error, and
// the connection closes.
func (c *serverConn) refuse(e *requestError) {
	body, _ := json.Marshal(struct {
		Description string `json:"description"`
	}{e.msg})
	if d := c.s.WriteTimeout; d > 0 {
		_ = c.nc.SetWriteDeadline(time.Now().Add(d))
	} else {
		_ = c.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
	}
	fmt.Fprintf(c.bw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		e.status, http.StatusText(e.status), len(body), body)
	_ = c.bw.Flush()
	c.linger = true // the rest of the request may still be coming
}
