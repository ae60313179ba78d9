package lean

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// chunkAfter is how much of an answer of unknown length is held before
// its head goes out with chunked framing; an answer that ends within it
// gets a Content-Length (net/http's bufferBeforeChunkingSize).
const chunkAfter = 2048

// response is the http.ResponseWriter of one request. Its head is written
// in one pass over the header map at WriteHeader (a later change to the
// map does not reach the client, as with net/http), the framing fields
// (Content-Length or chunked, Connection, Date, a sniffed Content-Type)
// when the first bytes of the body, or its end, decide them.
type response struct {
	c   *serverConn
	req *http.Request
	h   http.Header

	awaitNext bool // the final flush may wait for the next request (serverConn.writeAwaiting)

	status      int
	wroteHeader bool
	committed   bool // the head is in the connection's writer
	chunking    bool
	closeAfter  bool // the connection closes after this answer
	cl          int64
	written     int64
	hasType     bool // the handler set Content-Type (maybe to nil: no sniffing)
	hasDate     bool
	saidClose   bool // the handler's header says Connection: close
	head        []byte
	pending     []byte // body held before the head goes
	err         error

	cmu       sync.Mutex // with a body that expects 100 Continue
	continue_ bool       // a 100 Continue may still go
}

// bodyless reports whether the status allows no body.
func bodyless(status int) bool {
	return status >= 100 && status <= 199 || status == http.StatusNoContent || status == http.StatusNotModified
}

func (c *serverConn) newResponse(req *http.Request) *response {
	w := &response{c: c, req: req, h: make(http.Header, 8), cl: -1, head: c.headBuf[:0], pending: c.pendBuf[:0]}
	if b, ok := req.Body.(*requestBody); ok {
		w.continue_ = b.expect
	}
	return w
}

func (w *response) Header() http.Header { return w.h }

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.informational(code)
		return
	}
	if w.continue_ {
		w.cmu.Lock()
		w.continue_ = false
		w.cmu.Unlock()
	}
	w.wroteHeader, w.status = true, code
	b := w.statusLine(w.head[:0], code)
	for k, vv := range w.h {
		switch k {
		case "Content-Length":
			if len(vv) > 0 {
				if n, ok := parseLength([]byte(trimSpace(vv[0]))); ok {
					w.cl = n
				}
			}
			continue
		case "Transfer-Encoding":
			continue // the server frames the body
		case "Content-Type":
			if code == http.StatusNotModified {
				continue // as net/http: a 304 has no body to type
			}
			w.hasType = true
			if code == http.StatusNotModified {
				continue // as net/http: a 304 has neither type nor length
			}
		case "Date":
			w.hasDate = true
		case "Connection":
			w.saidClose = containsToken(vv, "close")
		}
		if !validFieldName(k) {
			continue
		}
		for _, v := range vv {
			b = appendField(b, k, v)
		}
	}
	if bodyless(code) {
		w.cl = -1
	}
	w.head = b
}

func (w *response) statusLine(b []byte, code int) []byte {
	if w.req.ProtoMinor == 0 {
		b = append(b, "HTTP/1.0 "...)
	} else {
		b = append(b, "HTTP/1.1 "...)
	}
	b = append(b, byte('0'+code/100), byte('0'+code/10%10), byte('0'+code%10), ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// informational writes a 1xx answer at once, with the header as it is.
func (w *response) informational(code int) {
	if w.req.ProtoMinor == 0 {
		return // HTTP/1.0 clients get none
	}
	b := w.statusLine(nil, code)
	for k, vv := range w.h {
		if validFieldName(k) {
			for _, v := range vv {
				b = appendField(b, k, v)
			}
		}
	}
	b = append(b, "\r\n"...)
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if _, err := w.c.bw.Write(b); err == nil {
		err = w.c.bw.Flush()
		w.fail(err)
	} else {
		w.fail(err)
	}
}

// sendContinue writes "100 Continue" unless the answer's head went first.
func (w *response) sendContinue() error {
	w.cmu.Lock()
	defer w.cmu.Unlock()
	if !w.continue_ {
		return nil
	}
	w.continue_ = false
	if _, err := w.c.bw.WriteString("HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
		return err
	}
	return w.c.bw.Flush()
}

func (w *response) fail(err error) {
	if err != nil && w.err == nil {
		w.err = err
		w.closeAfter = true
	}
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if bodyless(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	if !w.committed {
		if w.cl < 0 && len(w.pending)+len(p) <= chunkAfter {
			w.pending = append(w.pending, p...)
			return len(p), nil
		}
		first := p
		if len(w.pending) > 0 {
			first = w.pending
		}
		w.commitPending(first, false)
	}
	w.body(p)
	if w.err != nil {
		return 0, w.err
	}
	return len(p), nil
}

// commitPending commits the head (first and final as commit takes them)
// and writes the body held so far after it.
func (w *response) commitPending(first []byte, final bool) {
	w.commit(first, final)
	w.body(w.pending)
	w.pending = w.pending[:0]
}

// body writes p, as a chunk when chunking; nothing in answer to HEAD
// (whose writes count as net/http's do: for the Content-Length and the
// sniffed Content-Type of the answer a GET would get).
func (w *response) body(p []byte) {
	if len(p) == 0 || w.err != nil || w.req.Method == http.MethodHead {
		return
	}
	bw := w.c.bw
	if w.chunking {
		b := bw.AvailableBuffer()
		b = strconv.AppendInt(b, int64(len(p)), 16)
		b = append(b, "\r\n"...)
		_, err := bw.Write(b)
		w.fail(err)
	}
	_, err := bw.Write(p)
	w.fail(err)
	if w.chunking {
		_, err = bw.WriteString("\r\n")
		w.fail(err)
	}
}

// commit writes the head with its framing fields, decided by first (the
// first bytes of the body) and final (first is the whole body).
func (w *response) commit(first []byte, final bool) {
	w.committed = true
	b := w.head
	isHead := w.req.Method == http.MethodHead
	switch {
	case w.cl >= 0:
		b = appendLength(b, w.cl)
	case bodyless(w.status):
	case final && (!isHead || len(first) > 0):
		// A HEAD handler that wrote nothing may have left the body out
		// (net/http sends no length then either).
		w.cl = int64(len(first))
		b = appendLength(b, w.cl)
	case isHead: // no body follows: no framing
	case w.req.ProtoMinor >= 1:
		w.chunking = true
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	default:
		w.closeAfter = true // the body ends with the connection
	}
	if !w.hasType && !bodyless(w.status) && len(first) > 0 {
		b = append(b, "Content-Type: "...)
		b = append(b, http.DetectContentType(first)...)
		b = append(b, "\r\n"...)
	}
	if !w.hasDate {
		b = appendDate(b)
	}
	if w.req.Close || w.saidClose || w.c.s.closing.Load() || w.unfinishedBody() {
		w.closeAfter = true
	}
	switch {
	case w.closeAfter && !w.saidClose && w.req.ProtoMinor >= 1:
		// (HTTP/1.0 closes unless told otherwise: net/http says nothing.)
		b = append(b, "Connection: close\r\n"...)
	case !w.closeAfter && w.req.ProtoMinor == 0:
		b = append(b, "Connection: keep-alive\r\n"...)
	}
	b = append(b, "\r\n"...)
	w.head = b
	w.cmu.Lock()
	w.continue_ = false
	_, err := w.c.bw.Write(b)
	w.cmu.Unlock()
	w.fail(err)
}

func (w *response) unfinishedBody() bool {
	b, ok := w.req.Body.(*requestBody)
	return ok && b.unfinished()
}

func appendLength(b []byte, n int64) []byte {
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, n, 10)
	return append(b, "\r\n"...)
}

// Flush sends what is written so far (http.Flusher).
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush with its error (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commitPending(w.pending, false)
	}
	if w.err != nil {
		return w.err
	}
	err := w.c.bw.Flush()
	w.fail(err)
	return err
}

// SetReadDeadline sets the connection's read deadline (http.ResponseController).
func (w *response) SetReadDeadline(t time.Time) error { return w.c.nc.SetReadDeadline(t) }

// SetWriteDeadline sets the connection's write deadline (http.ResponseController).
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

// finish ends the answer after the handler returned: the head if it has
// not gone (with a Content-Length of what was written), the chunked
// body's end, and a flush. It reports whether the connection may carry
// another request.
func (w *response) finish() bool {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.committed {
		w.commitPending(w.pending, true) // a bodyless status has nothing pending: Write refused it
	} else if w.chunking && w.err == nil {
		_, err := w.c.bw.WriteString("0\r\n\r\n")
		w.fail(err)
	}
	if w.cl >= 0 && w.written != w.cl && !bodyless(w.status) && w.req.Method != http.MethodHead {
		w.closeAfter = true // shorter than it said: the client cannot tell where it ends
	}
	if w.err == nil {
		w.c.awaitNext = w.awaitNext && !w.closeAfter
		w.fail(w.c.bw.Flush())
		w.c.awaitNext = false
	}
	w.c.headBuf, w.c.pendBuf = w.head[:0], w.pending[:0]
	return !w.closeAfter
}

// dateNow is the Date field of the current second, shared.
var dateNow atomic.Pointer[dateField]

type dateField struct {
	sec  int64
	line []byte // "Date: ...\r\n"
}

func appendDate(b []byte) []byte {
	now := time.Now()
	sec := now.Unix()
	d := dateNow.Load()
	if d == nil || d.sec != sec {
		line := append([]byte("Date: "), now.UTC().AppendFormat(nil, http.TimeFormat)...)
		d = &dateField{sec: sec, line: append(line, "\r\n"...)}
		dateNow.Store(d)
	}
	return append(b, d.line...)
}
