// Package lean is an HTTP/1.1 client transport for the gateway's calls to
// its brokers, an http.RoundTripper that takes the place of http.Transport
// under httputil.ReverseProxy (brokers[].transport: lean).
//
// http.Transport gives every connection a reading and a writing goroutine
// and hands each request and answer between them and the caller over
// channels. Here the calling goroutine does it all: it takes a keep-alive
// connection from the pool (or dials one), writes the request to the
// connection's bufio.Writer and reads the answer from its bufio.Reader. No
// goroutine runs per connection or per request; when the call's context
// ends, a past deadline set on the connection interrupts a blocked write or
// read. It is registered on the request when the context is that of a
// request the lean Server runs (cancel.go), else with context.AfterFunc (a
// context that never ends, Done nil, registers none). The request's last
// bytes are written from within the wait for the answer (writeAwaiting,
// conn.go), so that the first read of the answer finds it. On Linux the
// reads and writes of a plain TCP connection are raw system calls
// (rawio_linux.go, rawread.go), without the runtime's bookkeeping around a
// call that might block: sysmon fell from 6.4 % to 1.6 % of the gateway's
// CPU under load, 0.95× the CPU per proxied GET.
//
// Both ends have a fast path for the plain case and fall back to the
// standard library for anything else:
//
//   - writeRequest (reqwrite.go) writes a request without a body or with
//     one of known length in one pass over its header map, into the
//     writer's free space, without (*http.Request).Write's sorting,
//     formatting and allocations. A trailer, a transfer coding of the
//     request's own, a body of unknown length (chunked, or probed on a
//     GET), CONNECT, an Opaque URL, a host that is not plain ASCII, a
//     control byte in the URL, a non-canonical field name, or a trace that
//     listens to the fields written: req.Write does it.
//   - readResponse (resread.go) parses a final HTTP/1.0 or 1.1 answer whose
//     header is whole in the reader's 4 kB buffer, with CRLF lines, token
//     field names, no folding, no Transfer-Encoding or Pragma, and one valid
//     Content-Length (none needed for HEAD, 204, 304): one allocation for
//     the Response, its body reader and up to four values, one string for
//     all values, interned common field names and status lines. Anything
//     else (1xx, chunked or close-delimited bodies, a header split across
//     reads, duplicate or odd Content-Length, ...): http.ReadResponse over
//     the same unconsumed bytes.
//
// FuzzRequestWrite and FuzzResponseRead hold the fast paths to what the
// standard library sends and reads; FuzzLeanFraming holds the transport's
// reading of answers to http.Transport's. Measured with BenchmarkExchange
// (a GET last_operation with a 62-byte JSON answer; medians of five runs,
// the fast paths against req.Write and http.ReadResponse in the same
// binary): the transport's own work (a connection answering from memory)
// 0.60× the time, 6 allocations instead of 18, 0.77× the bytes; a call
// over loopback, broker side included, 0.93× the time and 0.94× the CPU,
// 7 allocations instead of 19. Through the whole chain (proxy's
// BenchmarkTransports, eight runs each, alternating with a build without
// the fast paths) a lean call took 0.78× the time of one on http.Transport
// with one caller, 0.82× before; a proxied GET allocates 56 times, 68
// before.
//
// What it keeps of http.Transport's behaviour, and the gateway relies on:
//
//   - A connection goes back to the pool only once the answer's body was
//     read to its end (or there was none). A body closed early, any error,
//     a "Connection: close" on either side, an HTTP/1.0 answer without
//     keep-alive, a body delimited by the connection's close, a canceled
//     call or bytes after the answer: the connection is closed.
//   - The pool is per host, last in first out, bounded by MaxIdleConns,
//     and drops connections idle longer than IdleConnTimeout.
//   - A request on a reused connection that the broker had closed while
//     idle is sent again once, on a new connection, by http.Transport's
//     rule: when nothing of it was written and its body can be had again,
//     or when it is replayable (GET, HEAD, OPTIONS, TRACE, or an
//     Idempotency-Key header; no body or GetBody) and nothing of the answer
//     was read. A request that is not replayable is not sent on an idle
//     connection the broker has closed or written to: the connection is
//     probed first (one non-blocking peek, on Unix).
//   - TLS with the configuration given (its ServerName defaulting to the
//     URL's host), client certificates included; ResponseHeaderTimeout;
//     1xx informational answers skipped (and passed to the request's
//     httptrace.ClientTrace Got1xxResponse, through which ReverseProxy
//     forwards them); 101 Switching Protocols hands the connection over as
//     the body, as http.Transport does.
//
// What it does not do: HTTP/2, proxies from the environment, compression
// (no Accept-Encoding is added, so answers arrive as the broker sends
// them), and waiting on "Expect: 100-continue": the body is sent right
// after the header. The request is written before the answer is read, so
// a broker that answers early without reading a large body holds the call
// until it closes the connection or the call's context ends.
package lean

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"time"
)

// Defaults for the zero values of Transport's fields.
const (
	DefaultMaxIdleConns           = 100
	DefaultMaxResponseHeaderBytes = 10 << 20 // as http.Transport
)

// Transport is an HTTP/1.1 http.RoundTripper with a pool of keep-alive
// connections per host. Its fields must not change once it is in use; it
// is safe for concurrent use.
type Transport struct {
	// DialContext dials a TCP connection; nil: a net.Dialer's.
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
	// TLSClientConfig is cloned for every https connection, with ServerName
	// set to the URL's host when empty; nil: the zero configuration.
	TLSClientConfig *tls.Config
	// TLSHandshakeTimeout bounds a TLS handshake; zero: only the call's
	// context does.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for the answer's header once
	// the request is written; zero: only the call's context does.
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout is how long a connection stays in the pool unused;
	// zero: no limit.
	IdleConnTimeout time.Duration
	// MaxIdleConns bounds the idle connections kept per host; zero:
	// DefaultMaxIdleConns.
	MaxIdleConns int
	// MaxResponseHeaderBytes bounds the answer's header, 1xx answers
	// included; zero: DefaultMaxResponseHeaderBytes.
	MaxResponseHeaderBytes int64

	now    func() time.Time // nil: time.Now (tests set it)
	stdlib bool             // tests and benchmarks: req.Write and http.ReadResponse only, no fast paths

	mu     sync.Mutex
	pools  map[poolKey]*pool
	closed bool // by CloseIdleConnections: no connection is pooled after it
}

// poolKey names a pool: the URL's scheme (https or not) and its host.
type poolKey struct {
	tls  bool
	host string
}

// RoundTrip sends req over a pooled or new connection and reads the answer.
// Its body must be read to the end and closed for the connection to be
// used again.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := check(req); err != nil {
		closeBody(req)
		return nil, err
	}
	ctx := req.Context()
	key := poolKey{tls: req.URL.Scheme == "https", host: req.URL.Host}
	probe := !replayable(req)
	out := req
	for fresh := false; ; fresh = true {
		c, err := t.conn(ctx, key, fresh, probe)
		if err != nil {
			closeBody(out)
			return nil, err
		}
		res, err := t.exchange(ctx, c, out)
		if err == nil {
			res.Request = req
			return res, nil
		}
		var re *retryable
		if fresh || !errors.As(err, &re) || !re.allowed(out) {
			return nil, unwrapRetryable(err)
		}
		if out, err = rewind(out); err != nil {
			return nil, unwrapRetryable(re)
		}
	}
}

// CloseIdleConnections closes the pooled connections, for good: unlike
// http.Transport's, connections in use are closed instead of pooled when
// their calls end (the gateway calls it on the transport of a broker a
// reload dropped, or at exit).
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	var idle []*conn
	for _, p := range t.pools {
		idle = append(idle, p.idle...)
		clear(p.idle)
		p.idle = p.idle[:0]
		if p.timer != nil {
			p.timer.Stop()
			p.timer = nil
		}
	}
	t.closed = true
	t.mu.Unlock()
	for _, c := range idle {
		c.close()
	}
}

// check refuses a request this transport cannot send.
func check(req *http.Request) error {
	switch {
	case req.URL == nil:
		return errors.New("lean: request has no URL")
	case req.URL.Scheme != "http" && req.URL.Scheme != "https":
		return fmt.Errorf("lean: unsupported protocol scheme %q", req.URL.Scheme)
	case req.URL.Host == "":
		return errors.New("lean: request has no host in its URL")
	}
	return nil
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// noBody reports whether req has no body to send.
func noBody(req *http.Request) bool { return req.Body == nil || req.Body == http.NoBody }

// replayable reports whether req may be sent again after its connection
// failed (http.Request.isReplayable).
func replayable(req *http.Request) bool {
	if !noBody(req) && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	_, a := req.Header["Idempotency-Key"]
	_, b := req.Header["X-Idempotency-Key"]
	return a || b
}

// retryable is a failure on a reused connection before anything of the
// answer was read: the broker may have closed it while it was idle.
type retryable struct {
	nothingWritten bool
	err            error
}

func (e *retryable) Error() string { return e.err.Error() }
func (e *retryable) Unwrap() error { return e.err }

// allowed is http.Transport's shouldRetryRequest for a reused connection.
func (e *retryable) allowed(req *http.Request) bool {
	if e.nothingWritten {
		return noBody(req) || req.GetBody != nil
	}
	return replayable(req)
}

func unwrapRetryable(err error) error {
	if re, ok := err.(*retryable); ok {
		return re.err
	}
	return err
}

// rewind returns req with its body to send again (GetBody).
func rewind(req *http.Request) (*http.Request, error) {
	if noBody(req) {
		return req, nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	r2 := *req
	r2.Body = body
	return &r2, nil
}

// isConnGone reports whether err says the peer closed or reset the
// connection.
func isConnGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}
