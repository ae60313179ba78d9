package main

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// A link is an in-process TCP proxy on a free loopback port in front of one
// address (a broker, Redis). The nemesis degrades it: every byte waits
// delay before it is passed on, a stall holds every byte until it ends, and
// a cut resets every connection through it (and, while refusing, every new
// one). What goes through it is otherwise untouched.
type link struct {
	name   string
	target string
	ln     net.Listener

	mu       sync.Mutex
	cond     *sync.Cond
	delay    time.Duration
	stalled  bool
	refusing bool
	conns    map[*linkConn]struct{}
	closed   bool
}

type linkConn struct{ a, b net.Conn }

// newLink listens on a free loopback port and forwards to target.
func newLink(name, target string) (*link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &link{name: name, target: target, ln: ln, conns: map[*linkConn]struct{}{}}
	l.cond = sync.NewCond(&l.mu)
	go l.serve()
	return l, nil
}

// Addr is where clients connect.
func (l *link) Addr() string { return l.ln.Addr().String() }

func (l *link) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		go l.handle(c)
	}
}

// handle passes c to the link's target through its faults (handleVia).
func (l *link) handle(c net.Conn) { handleVia(l, c, l.target) }

// pipe copies src to dst through the link's faults; at src's EOF it
// half-closes dst, as TCP would.
func (l *link) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.wait() {
				reset(dst)
				reset(src)
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				reset(src)
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
					return
				}
			}
			reset(dst)
			return
		}
	}
}

// wait holds a chunk while the link is stalled, then for its delay; false
// when the link was closed meanwhile.
func (l *link) wait() bool {
	l.mu.Lock()
	for l.stalled && !l.closed {
		l.cond.Wait()
	}
	d, closed := l.delay, l.closed
	l.mu.Unlock()
	if d > 0 {
		time.Sleep(d)
	}
	return !closed
}

// setDelay makes every chunk wait d (0: none).
func (l *link) setDelay(d time.Duration) {
	l.mu.Lock()
	l.delay = d
	l.mu.Unlock()
}

// setStalled holds (true) or releases (false) every chunk.
func (l *link) setStalled(on bool) {
	l.mu.Lock()
	l.stalled = on
	l.cond.Broadcast()
	l.mu.Unlock()
}

// cut resets every connection through the link now; while refusing, new
// connections are reset as they come.
func (l *link) cut(refusing bool) {
	l.mu.Lock()
	l.refusing = refusing
	conns := make([]*linkConn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	for _, c := range conns {
		reset(c.a)
		reset(c.b)
	}
}

// heal ends every fault.
func (l *link) heal() {
	l.mu.Lock()
	l.delay, l.stalled, l.refusing = 0, false, false
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *link) Close() {
	l.mu.Lock()
	l.closed = true
	l.cond.Broadcast()
	l.mu.Unlock()
	_ = l.ln.Close()
	l.cut(true)
}

// reset closes c with an RST (SO_LINGER 0) rather than a FIN.
func reset(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}
