package lean

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"syscall"
	"time"
)

// conn is one connection to a broker, used by one call at a time.
type conn struct {
	nc        net.Conn // the TLS connection for https
	raw       syscall.RawConn
	br        *bufio.Reader // reads from conn.Read
	bw        *bufio.Writer // writes to conn.Write
	tlsState  *tls.ConnectionState
	interrupt func() // sets a past deadline; built once, for context.AfterFunc

	reused    bool
	idleAt    time.Time
	idleFor   time.Duration // how long a reused connection was idle before this call
	readLimit int64         // bytes of header left to read; math.MaxInt64 for bodies
	sawEOF    bool
	nwrite    int64

	// awaitAnswer: the next Write is the whole request, written from
	// within the wait for the answer (writeAwaiting).
	awaitAnswer bool
	awaitStep   func(fd uintptr) bool // c.step, built once
	pending     []byte                // what step writes; nil once written
	written     int                   // what step wrote of it
	writeErr    error                 // step's write error

	// sock reads a plain TCP connection with raw system calls (raw nil:
	// a TLS connection, or one without a RawConn).
	sock sockReader
}

// aLongTimeAgo is a deadline that has passed: it interrupts a blocked
// read or write at once.
var aLongTimeAgo = time.Unix(1, 0)

// dial opens a connection for key, with its TLS handshake for https.
func (t *Transport) dial(ctx context.Context, key poolKey) (*conn, error) {
	addr := canonicalAddr(key)
	dial := t.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	nc, err := dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &conn{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok {
		c.raw, _ = sc.SyscallConn()
	}
	if key.tls {
		if err := c.handshake(ctx, t, addr); err != nil {
			nc.Close()
			return nil, err
		}
	}
	c.interrupt = func() { _ = c.nc.SetDeadline(aLongTimeAgo) }
	c.awaitStep = c.step
	if c.raw != nil && !key.tls {
		c.sock.init(nc, c.raw)
	}
	c.br = bufio.NewReaderSize(c, 4<<10)
	c.bw = bufio.NewWriterSize(c, 4<<10)
	return c, nil
}

// handshake wraps c in TLS with a clone of the transport's configuration.
func (c *conn) handshake(ctx context.Context, t *Transport, addr string) error {
	var cfg *tls.Config
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	} else {
		cfg = &tls.Config{}
	}
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(addr)
	}
	cfg.NextProtos = nil // HTTP/1.1 only
	if t.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		defer cancel()
	}
	tc := tls.Client(c.nc, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		return err
	}
	st := tc.ConnectionState()
	c.nc, c.tlsState = tc, &st
	return nil
}

// canonicalAddr is key's host with the scheme's port when it has none.
func canonicalAddr(key poolKey) string {
	host := key.host
	if _, _, err := net.SplitHostPort(host); err == nil {
		return host
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if key.tls {
		return net.JoinHostPort(host, "443")
	}
	return net.JoinHostPort(host, "80")
}

// Read reads from the connection for br, within the header limit.
func (c *conn) Read(p []byte) (int, error) {
	if c.readLimit <= 0 {
		return 0, errHeaderTooLong
	}
	if int64(len(p)) > c.readLimit {
		p = p[:c.readLimit]
	}
	var n int
	var err error
	if c.sock.raw != nil { // plain TCP (dial sets sock up only then)
		n, err = c.sock.Read(p)
	} else {
		n, err = c.nc.Read(p)
	}
	if err != nil {
		c.sawEOF = true
	}
	c.readLimit -= int64(n)
	return n, err
}

// Write writes to the connection for bw, counting what went out.
func (c *conn) Write(p []byte) (int, error) {
	if c.awaitAnswer {
		c.awaitAnswer = false
		if n := c.writeAwaiting(p); n > 0 {
			c.nwrite += int64(n)
			if n == len(p) {
				return n, nil
			}
			m, err := c.nc.Write(p[n:])
			c.nwrite += int64(m)
			return n + m, err
		}
	}
	n, err := c.nc.Write(p)
	c.nwrite += int64(n)
	return n, err
}

// awaitIdleMax bounds how long a reused connection may have been idle for
// its request to be written by writeAwaiting.
const awaitIdleMax = time.Second

// canAwait reports whether the request about to be flushed on c may be
// written by writeAwaiting: a plain TCP connection, nothing of the request
// written yet (an early answer to its first part would have been missed),
// and not idle long enough for the broker to have closed it.
func (c *conn) canAwait() bool {
	return c.raw != nil && c.tlsState == nil && c.nwrite == 0 && (!c.reused || c.idleFor < awaitIdleMax)
}

// writeAwaiting writes p, the whole request, from within a wait for the
// connection to become readable, and returns once the broker's answer can
// be read (or the wait failed: a deadline, the call's interrupt), so that
// the first read of the answer does not find nothing. A read would: the
// broker has not answered yet. Go's poller arms its readiness when a read
// starts (RawConn.Read's prepare step), so waiting after the write could
// miss an answer that came in between; writing after the prepare step
// cannot. Returns how much of p went out; the caller writes the rest the
// usual way (a full socket buffer), and 0 when nothing did.
func (c *conn) writeAwaiting(p []byte) int {
	c.pending, c.written, c.writeErr = p, 0, nil
	_ = c.raw.Read(c.awaitStep) // its error comes again from the answer's first read
	c.pending = nil
	return c.written
}

// step is writeAwaiting's RawConn.Read callback: at its first call it
// writes the request and asks to wait; at the next (readable, or the wait
// ended) it is done.
func (c *conn) step(fd uintptr) bool {
	p := c.pending
	if p == nil {
		return true
	}
	c.pending = nil
	n, e := sysWrite(fd, p)
	c.written = n
	if e != 0 {
		c.writeErr = e
	}
	return e != 0 || n < len(p)
}

func (c *conn) close() { c.nc.Close() }

var errHeaderTooLong = errors.New("lean: the answer's header is longer than allowed")

// headerTimeout is the error of an answer whose header did not come
// within ResponseHeaderTimeout.
type headerTimeout struct{}

func (headerTimeout) Error() string   { return "lean: timeout awaiting response headers" }
func (headerTimeout) Timeout() bool   { return true }
func (headerTimeout) Temporary() bool { return true }

// exchange writes req on c and reads the answer's header. On success the
// connection belongs to the answer's body (or is pooled again when there
// is none); on failure it is closed.
func (t *Transport) exchange(ctx context.Context, c *conn, req *http.Request) (*http.Response, error) {
	var stop callWatch
	if ctx.Done() != nil || t.stdlib { // a context that never ends needs none
		stop = watchCall(ctx, c.interrupt)
	}
	c.nwrite = 0
	err := t.write(c.bw, req)
	if err == nil {
		awaiting := c.canAwait()
		if awaiting {
			c.awaitAnswer = true
			t.headerDeadline(ctx, c) // the wait for the answer is in the flush
		}
		err = c.bw.Flush()
		c.awaitAnswer = false
		if err == nil && !awaiting {
			t.headerDeadline(ctx, c)
		}
	}
	if err != nil {
		stop.stop()
		c.close()
		err = callError(ctx, "writing the request", err)
		if c.reused && ctx.Err() == nil && (c.nwrite == 0 || isConnGone(err)) {
			return nil, &retryable{nothingWritten: c.nwrite == 0, err: err}
		}
		return nil, err
	}
	res, fixed, err := t.readHeader(ctx, c, req)
	if err != nil {
		stop.stop()
		c.close()
		return nil, err
	}
	res.TLS = c.tlsState
	if isProtocolSwitch(res) {
		stop.stop()
		res.Body = &switched{br: c.br, conn: c.nc}
		return res, nil
	}
	key := poolKey{tls: req.URL.Scheme == "https", host: req.URL.Host}
	keep := !res.Close && !req.Close
	if res.Body == http.NoBody {
		t.release(key, c, stop, keep)
		return res, nil
	}
	b := fixed
	if b == nil {
		b = &body{rc: res.Body}
	}
	b.t, b.c, b.key, b.ctx, b.stop, b.keep = t, c, key, ctx, stop, keep
	res.Body = b
	return res, nil
}

// write writes req to bw: with writeRequest when it handles req, else
// with (*http.Request).Write.
func (t *Transport) write(bw *bufio.Writer, req *http.Request) error {
	if !t.stdlib {
		if ok, err := writeRequest(bw, req); ok {
			return err
		}
	}
	return req.Write(bw)
}

// headerDeadline sets the read deadline of ResponseHeaderTimeout, once per
// call: before the flush when the wait for the answer is in it
// (writeAwaiting), else after. A call whose context ended already keeps
// its AfterFunc's past deadline.
func (t *Transport) headerDeadline(ctx context.Context, c *conn) {
	if t.ResponseHeaderTimeout > 0 {
		_ = c.nc.SetReadDeadline(time.Now().Add(t.ResponseHeaderTimeout))
		if ctx.Err() != nil {
			c.interrupt()
		}
	}
}

// readHeader reads the answer's header, skipping 1xx informational ones.
// When readResponse read it and it has a body, fixed is to be its Body.
func (t *Transport) readHeader(ctx context.Context, c *conn, req *http.Request) (res *http.Response, fixed *body, err error) {
	limit := t.MaxResponseHeaderBytes
	if limit <= 0 {
		limit = DefaultMaxResponseHeaderBytes
	}
	c.readLimit = limit
	var trace *httptrace.ClientTrace
	res, err = func() (*http.Response, error) {
		if _, err := c.br.Peek(1); err != nil {
			err = t.readError(ctx, err)
			if c.reused && ctx.Err() == nil && isConnGone(err) {
				return nil, &retryable{err: err}
			}
			return nil, err
		}
		for {
			if !t.stdlib {
				res, b, ok := readResponse(c.br, req)
				if ok {
					fixed = b
					return res, nil // a final answer
				}
			}
			res, err := http.ReadResponse(c.br, req)
			if err != nil {
				return nil, t.readError(ctx, err)
			}
			if res.StatusCode < 100 || res.StatusCode > 199 || res.StatusCode == http.StatusSwitchingProtocols {
				return res, nil
			}
			if trace == nil {
				trace = httptrace.ContextClientTrace(ctx)
			}
			if trace != nil && trace.Got1xxResponse != nil {
				if err := trace.Got1xxResponse(res.StatusCode, textproto.MIMEHeader(res.Header)); err != nil {
					return nil, err
				}
				c.readLimit = limit // the caller saw it: it limits them
			}
		}
	}()
	c.readLimit = math.MaxInt64
	if t.ResponseHeaderTimeout > 0 && err == nil {
		_ = c.nc.SetReadDeadline(time.Time{})
		if ctx.Err() != nil { // the AfterFunc ran before the deadline was cleared
			c.interrupt()
		}
	}
	return res, fixed, err
}

// readError says why reading the answer failed: the call's context when
// it ended, the header timeout when it passed, else err.
func (t *Transport) readError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return callError(ctx, "reading the answer", err)
	}
	var ne net.Error
	if t.ResponseHeaderTimeout > 0 && errors.As(err, &ne) && ne.Timeout() {
		return headerTimeout{}
	}
	return err
}

// callError is err, or the call context's error when the context ended
// (its AfterFunc interrupted the connection).
func callError(ctx context.Context, op string, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("lean: %s: %w", op, cerr)
	}
	return err
}

// release pools c when keep and the call's AfterFunc did not run, and
// closes it otherwise.
func (t *Transport) release(key poolKey, c *conn, stop callWatch, keep bool) {
	if !stop.stop() || !keep || c.sawEOF || c.br.Buffered() > 0 {
		c.close()
		return
	}
	c.reused = false
	t.put(key, c)
}

// isProtocolSwitch reports whether res is a 101 switching protocols
// (http.Response.isProtocolSwitch).
func isProtocolSwitch(res *http.Response) bool {
	if res.StatusCode != http.StatusSwitchingProtocols || res.Header.Get("Upgrade") == "" {
		return false
	}
	for _, v := range res.Header["Connection"] {
		for tok := range strings.SplitSeq(v, ",") {
			if strings.EqualFold(strings.TrimSpace(tok), "upgrade") {
				return true
			}
		}
	}
	return false
}
