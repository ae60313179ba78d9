package lean

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
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
