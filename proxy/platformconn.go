package proxy

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
)

// ServeStandard prepares srv, the standard library's server of the
// platform listener (listen.server: standard, and TLS), and returns ln
// with its connections wrapped, for srv.Serve: a platform that half-closes
// its side of the connection (EOF, RFC 9112 §9.6) is served as any other,
// and only a platform that went away cancels its request.
//
// net/http cancels a request's context on any failed read of the
// connection, EOF included, so a half-closed request would see its
// context end while the platform still reads. Here the handler runs with
// a context of its own instead, canceled only by a read that fails with
// something other than EOF (a reset) or a failed write, as the lean
// server's. Each request costs a context and a copy of the request more
// (BenchmarkServeStandard).
func ServeStandard(srv *http.Server, ln net.Listener) net.Listener {
	next := srv.Handler
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		if pc := platformConnOf(c); pc != nil {
			ctx = context.WithValue(ctx, platformConnKey{}, pc)
			// The requests' contexts derive from base: the connection's
			// values (net/http adds the local address after this hook),
			// none of its cancelations.
			pc.base = context.WithValue(context.WithoutCancel(ctx), http.LocalAddrContextKey, c.LocalAddr())
		}
		return ctx
	}
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		pc, _ := r.Context().Value(platformConnKey{}).(*platformConn)
		if pc == nil {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancelCause(pc.base)
		pc.running(cancel)
		defer pc.ended(cancel)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
	return platformListener{ln}
}

// platformConnKey is the context key of a connection's platformConn.
type platformConnKey struct{}

// errPlatformGone is the cause of a request's context when its platform
// went away: a reset, or a failed write.
var errPlatformGone = errors.New("the platform closed the connection")

// platformListener wraps each accepted connection in a platformConn.
type platformListener struct{ net.Listener }

func (l platformListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &platformConn{Conn: c}, nil
}

// platformConn is a platform's connection: it cancels its running
// request when a read fails with anything but EOF or a deadline, or a
// write fails.
type platformConn struct {
	net.Conn
	base   context.Context // its requests' parent (ServeStandard)
	mu     sync.Mutex
	cancel context.CancelCauseFunc // the running request's, or nil
	gone   bool
}

// platformConnOf finds the platformConn under c (itself, or under TLS).
func platformConnOf(c net.Conn) *platformConn {
	if tc, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = tc.NetConn()
	}
	pc, _ := c.(*platformConn)
	return pc
}

func (c *platformConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && err != io.EOF && !isTimeoutErr(err) {
		c.wentAway()
	}
	return n, err
}

func (c *platformConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	if err != nil && !isTimeoutErr(err) {
		c.wentAway()
	}
	return n, err
}

// CloseWrite half-closes c, as net/http does before it closes a
// connection whose client may still send (its closeWriteAndWait).
func (c *platformConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// running sets the cancel of the request that runs on c (nil: none); a
// request that starts on a connection gone is canceled at once.
func (c *platformConn) running(cancel context.CancelCauseFunc) {
	c.mu.Lock()
	c.cancel = cancel
	gone := c.gone
	c.mu.Unlock()
	if gone && cancel != nil {
		cancel(errPlatformGone)
	}
}

// ended ends the request that ran on c, canceled by cancel.
func (c *platformConn) ended(cancel context.CancelCauseFunc) {
	c.running(nil)
	cancel(nil)
}

// wentAway marks c gone and cancels its running request.
func (c *platformConn) wentAway() {
	c.mu.Lock()
	c.gone = true
	cancel := c.cancel
	c.mu.Unlock()
	if cancel != nil {
		cancel(errPlatformGone)
	}
}

func isTimeoutErr(err error) bool { // a deadline, not a failure
	ne, ok := err.(net.Error) // a conn's errors are *net.OpError: no errors.As on each aborted read
	return ok && ne.Timeout()
}
