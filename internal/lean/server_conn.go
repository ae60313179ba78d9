package lean

// A server connection: its loop (read a request, run the handler, answer),
// its reader and writer, and the answer's last write that awaits the next
// request (writeAwaiting).

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
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
