package lean

// One call's exchange on a broker connection: the request written, the
// answer's head read within ResponseHeaderTimeout, and the connection pooled
// again or closed after.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"strings"
	"time"
)

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
