package lean

import (
	"cmp"
	"context"
	"errors"
	"log"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
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
