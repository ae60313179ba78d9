package lean

// A request's body: setBody gives a request its Body, a requestBody reading
// the Content-Length's bytes or the chunked body (and its trailer) from the
// connection, and drained after the answer so that the connection can serve
// the next request.

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"sync"
	"time"
)

// setBody gives req its Body: http.NoBody, or a requestBody reading the
// Content-Length's bytes or the chunked body from the connection, which
// sends "100 Continue" at its first read when the client expects one.
func (c *serverConn) setBody(req *http.Request) *requestError {
	// As net/http: the first Expect line counts, an empty one is none,
	// and 100-continue anywhere in it is a 100-continue (the fuzzer
	// found "Expect:" refused).
	expect := ""
	if vv := req.Header["Expect"]; len(vv) > 0 {
		expect = vv[0]
	}
	continues := false
	if hasToken(expect, "100-continue") {
		continues = req.ProtoMinor >= 1 && req.ContentLength != 0
	} else if expect != "" {
		return refused(http.StatusExpectationFailed, "unsupported Expect %q: want 100-continue", clip([]byte(expect)))
	}
	if req.ContentLength == 0 {
		req.Body = http.NoBody
		return nil
	}
	b := &requestBody{c: c, n: req.ContentLength, expect: continues}
	if req.ContentLength < 0 {
		b.chunked = httputil.NewChunkedReader(c.br)
	}
	req.Body = b
	return nil
}

// hasToken reports whether token (lower-case) is in v, ASCII case aside,
// between the start or end of v, spaces, tabs and commas (net/http's
// hasToken).
func hasToken(v, token string) bool {
	for sp := 0; sp+len(token) <= len(v); sp++ {
		if sp > 0 && !tokenBoundary(v[sp-1]) {
			continue
		}
		if end := sp + len(token); end != len(v) && !tokenBoundary(v[end]) {
			continue
		}
		if tokenEqual(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func tokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// maxDrain is how much of a body the handler left unread is read and
// dropped after the answer, so that the connection can serve the next
// request (net/http's maxPostHandlerReadBytes); a longer rest closes it.
const maxDrain = 256 << 10

// requestBody is a request's body on the connection.
type requestBody struct {
	c       *serverConn
	w       *response
	n       int64     // bytes left of a Content-Length body
	chunked io.Reader // a chunked body's reader, nil otherwise
	expect  bool      // a 100 Continue is owed at the first read

	mu     sync.Mutex
	sawEOF bool
	closed bool // by the handler, or the answer is done
	done   bool // the answer is done: reads fail
	err    error
}

func (b *requestBody) Read(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done || b.closed {
		return 0, errReqBodyClosed
	}
	return b.read(p)
}

func (b *requestBody) read(p []byte) (n int, err error) {
	if b.sawEOF {
		return 0, io.EOF
	}
	if b.err != nil {
		return 0, b.err
	}
	if b.expect {
		b.expect = false
		if b.w != nil && b.w.sendContinue() != nil {
			b.err = io.ErrUnexpectedEOF
			return 0, b.err
		}
	}
	if b.chunked != nil {
		n, err = b.chunked.Read(p)
		if err == io.EOF {
			err = b.readTrailer()
		}
	} else {
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err = b.c.br.Read(p)
		b.n -= int64(n)
		if err == io.EOF && b.n > 0 {
			err = io.ErrUnexpectedEOF
		}
		if err == nil && b.n == 0 {
			err = io.EOF
		}
	}
	switch {
	case err == io.EOF:
		b.sawEOF = true
		b.c.arm() // the connection is the client's own again: watch it
	case err != nil:
		b.err = err
	}
	return n, err
}

// readTrailer reads the chunked body's trailer section and drops it (the
// gateway forwards no trailers), as net/http's body.readTrailer reads it,
// with its errors: the fuzzer found the bodies lean took where net/http
// failed (a bare LF, a malformed field) and the other way round.
func (b *requestBody) readTrailer() error {
	br := b.c.br
	buf, err := br.Peek(2)
	if bytes.Equal(buf, []byte("\r\n")) {
		_, _ = br.Discard(2)
		return io.EOF
	}
	if len(buf) < 2 {
		return errTrailerEOF
	}
	if err != nil {
		return err
	}
	if !upcomingDoubleCRLF(br) {
		return errors.New("http: suspiciously long trailer after chunked body")
	}
	if _, err := textproto.NewReader(br).ReadMIMEHeader(); err != nil {
		if err == io.EOF {
			return errTrailerEOF
		}
		return err
	}
	return io.EOF
}

var errTrailerEOF = errors.New("http: unexpected EOF reading trailer")

// upcomingDoubleCRLF reports whether br's buffer holds, or can be filled
// up to, a CRLF CRLF (net/http's seeUpcomingDoubleCRLF: it bounds a
// trailer to the buffer's size).
func upcomingDoubleCRLF(br *bufio.Reader) bool {
	for n := 4; ; n++ {
		buf, err := br.Peek(n)
		if bytes.HasSuffix(buf, []byte("\r\n\r\n")) {
			return true
		}
		if err != nil {
			return false
		}
	}
}

func (b *requestBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return nil
}

// drain reads what the handler left of the body, up to maxDrain, so that
// the connection can carry the next request; false: close it instead.
// Reads from then on fail.
func (b *requestBody) drain() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = true
	if b.sawEOF {
		return true
	}
	if b.err != nil || b.expect { // the client may not have sent it
		return false
	}
	if b.chunked == nil && b.n > maxDrain {
		return false
	}
	if d := b.c.s.ReadTimeout; d > 0 {
		_ = b.c.nc.SetReadDeadline(time.Now().Add(d))
	}
	var buf [4096]byte
	for total := 0; total <= maxDrain; {
		n, err := b.read(buf[:])
		total += n
		if err == io.EOF {
			return true
		}
		if err != nil {
			return false
		}
	}
	return false
}

// unfinished reports whether the handler left more of the body than the
// server would drain (the answer then says Connection: close).
func (b *requestBody) unfinished() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.sawEOF && (b.err != nil || b.expect || b.chunked == nil && b.n > maxDrain)
}

var errReqBodyClosed = errors.New("http: invalid Read on closed Body")
