package lean

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSockReaderLikeConnRead holds sockReader (raw read(2) calls through
// the connection's RawConn) to net.Conn.Read: for each case, the same
// count, bytes and error (its text with the addresses taken out, and what
// errors.Is and net.Error tell of it), on a fresh loopback connection each.
func TestSockReaderLikeConnRead(t *testing.T) {
	type peerFn func(t *testing.T, local, peer *net.TCPConn)
	cases := []struct {
		name string
		size int
		do   peerFn
	}{
		{"bytes waiting", 16, func(t *testing.T, _, peer *net.TCPConn) { write(t, peer, "hello") }},
		{"more waiting than fits", 3, func(t *testing.T, _, peer *net.TCPConn) { write(t, peer, "hello") }},
		{"bytes come later", 16, func(t *testing.T, _, peer *net.TCPConn) {
			go func() { time.Sleep(20 * time.Millisecond); peer.Write([]byte("late")) }()
		}},
		{"zero-length read", 0, func(t *testing.T, _, peer *net.TCPConn) { write(t, peer, "x") }},
		{"peer closed", 16, func(t *testing.T, _, peer *net.TCPConn) { peer.Close() }},
		{"peer half-closed after bytes", 16, func(t *testing.T, _, peer *net.TCPConn) {
			write(t, peer, "last")
			peer.CloseWrite()
		}},
		{"peer reset", 16, func(t *testing.T, _, peer *net.TCPConn) {
			peer.SetLinger(0)
			peer.Close()
		}},
		{"deadline passed", 16, func(t *testing.T, local, _ *net.TCPConn) { local.SetReadDeadline(aLongTimeAgo) }},
		{"deadline passed with bytes waiting", 16, func(t *testing.T, local, peer *net.TCPConn) {
			write(t, peer, "hello")
			local.SetReadDeadline(aLongTimeAgo)
		}},
		{"deadline while waiting", 16, func(t *testing.T, local, _ *net.TCPConn) {
			local.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		}},
		{"closed before", 16, func(t *testing.T, local, _ *net.TCPConn) { local.Close() }},
		{"closed while waiting", 16, func(t *testing.T, local, _ *net.TCPConn) {
			go func() { time.Sleep(20 * time.Millisecond); local.Close() }()
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			std := readOnce(t, tc.size, tc.do, func(c *net.TCPConn, p []byte) (int, error) { return c.Read(p) })
			raw := readOnce(t, tc.size, tc.do, func(c *net.TCPConn, p []byte) (int, error) {
				var r sockReader
				rc, err := c.SyscallConn()
				if err != nil {
					t.Fatal(err)
				}
				r.init(c, rc)
				if r.raw == nil {
					t.Fatal("sockReader did not take a *net.TCPConn")
				}
				return r.Read(p)
			})
			if std != raw {
				t.Errorf("net.Conn.Read: %+v\nsockReader:    %+v", std, raw)
			}
		})
	}
}

// readOutcome is what one read gave, comparable across connections.
type readOutcome struct {
	n                               int
	data, err                       string
	eof, timeout, closed, reset, op bool
}

func readOnce(t *testing.T, size int, do func(t *testing.T, local, peer *net.TCPConn), read func(*net.TCPConn, []byte) (int, error)) readOutcome {
	t.Helper()
	local, peer := tcpPair(t)
	do(t, local, peer)
	p := make([]byte, size)
	n, err := read(local, p)
	o := readOutcome{n: n, data: string(p[:n])}
	if err != nil {
		msg := err.Error()
		for _, a := range []net.Addr{local.LocalAddr(), local.RemoteAddr()} {
			msg = strings.ReplaceAll(msg, a.String(), "ADDR")
		}
		o.err = msg
		var ne net.Error
		o.timeout = errors.As(err, &ne) && ne.Timeout() && errors.Is(err, os.ErrDeadlineExceeded)
		var oe *net.OpError
		o.op = errors.As(err, &oe) && oe.Op == "read"
	}
	o.eof = err == io.EOF
	o.closed = errors.Is(err, net.ErrClosed)
	o.reset = errors.Is(err, syscall.ECONNRESET)
	return o
}

// tcpPair is a connected pair of loopback TCP connections, closed at the
// test's end.
func tcpPair(t *testing.T) (local, peer *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	pc, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { c.Close(); pc.Close() })
	return c.(*net.TCPConn), pc.(*net.TCPConn)
}

func write(t *testing.T, c net.Conn, s string) {
	t.Helper()
	if _, err := c.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}
