package lean

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"
)

// requestError is a request the server refuses: status 0 closes the
// connection without an answer (the client went away, or a timeout
// passed before a whole head came).
type requestError struct {
	status int
	msg    string
}

func refused(status int, format string, args ...any) *requestError {
	return &requestError{status: status, msg: fmt.Sprintf(format, args...)}
}

var errClosed = &requestError{}

// readRequest reads the next request's head and sets up its body. The
// head is parsed as net/http's server parses it, with its checks (a
// valid method, an HTTP/1.x version, one valid Host on HTTP/1.1, valid
// field names and values, one Content-Length or chunked, no other
// transfer coding), and more strictly where a request would be
// ambiguous: folded lines, Transfer-Encoding with Content-Length or on
// HTTP/1.0, and CONNECT are refused.
func (c *serverConn) readRequest() (*http.Request, *requestError) {
	head, consumed, rerr := c.readHead(c.s.maxHeaderBytes() + 4096)
	if rerr != nil {
		return nil, rerr
	}
	p := reqParser{headParser{head: head}}
	req, rerr := p.parse()
	if consumed > 0 {
		_, _ = c.br.Discard(consumed)
	}
	if rerr != nil {
		return nil, rerr
	}
	req.RemoteAddr = c.remote
	c.afterPOST = req.Method == http.MethodPost
	if err := c.setBody(req); err != nil {
		return nil, err
	}
	return req, nil
}

// readHead returns the request's head, its request line and fields each
// ending in LF (or CRLF), the empty line after them consumed. When the
// head is whole in br's buffer, head is that buffer and consumed the
// bytes to discard once it is parsed; otherwise it is a copy, read line
// by line, and consumed 0.
func (c *serverConn) readHead(limit int) (head []byte, consumed int, rerr *requestError) {
	for {
		buf, _ := c.br.Peek(c.br.Buffered())
		if c.afterPOST {
			if !c.dropPostCRLF(buf) {
				return nil, 0, errClosed
			}
			continue
		}
		if end := headEnd(buf); end >= 0 {
			if end > limit {
				return nil, 0, refused(http.StatusRequestHeaderFieldsTooLarge, "the request's head is longer than %d bytes", limit-4096)
			}
			return buf[:end], end + blankLen(buf[end:]), nil
		}
		if len(buf) >= limit {
			return nil, 0, refused(http.StatusRequestHeaderFieldsTooLarge, "the request's head is longer than %d bytes", limit-4096)
		}
		if rerr := badFirstLine(buf); rerr != nil {
			return nil, 0, rerr
		}
		if len(buf) == c.br.Size() {
			break // longer than the buffer: line by line
		}
		if _, err := c.br.Peek(len(buf) + 1); err != nil {
			return nil, 0, errClosed
		}
	}
	var b []byte
	for {
		line, err := c.br.ReadSlice('\n')
		if len(b)+len(line) > limit {
			return nil, 0, refused(http.StatusRequestHeaderFieldsTooLarge, "the request's head is longer than %d bytes", limit-4096)
		}
		if err == bufio.ErrBufferFull {
			b = append(b, line...)
			continue
		}
		if err != nil {
			return nil, 0, errClosed
		}
		if len(b) > 0 && (len(line) == 1 || len(line) == 2 && line[0] == '\r') && b[len(b)-1] == '\n' {
			return b, 0, nil // the blank line ends the head
		}
		b = append(b, line...)
	}
}

// dropPostCRLF drops the CR and LF bytes among the first four after a
// POST, as net/http's server does (RFC 9112 §2.2: some clients send a
// CRLF after a POST's body), once buf, the buffered bytes, tells how many
// there are: else it waits for one more byte. false: the connection ended.
func (c *serverConn) dropPostCRLF(buf []byte) bool {
	n := 0
	for n < len(buf) && n < 4 && (buf[n] == '\r' || buf[n] == '\n') {
		n++
	}
	if n == len(buf) && n < 4 {
		_, err := c.br.Peek(len(buf) + 1)
		return err == nil
	}
	c.afterPOST = false
	_, _ = c.br.Discard(n)
	return true
}

// headEnd returns the length of the head at the start of buf, through
// the LF of its last field line, or -1 when buf holds no blank line.
func headEnd(buf []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(buf[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		if i > 1 && i < len(buf) && buf[i] == '\n' {
			return i
		}
		if i > 1 && i+1 < len(buf) && buf[i] == '\r' && buf[i+1] == '\n' {
			return i
		}
	}
}

// blankLen is the length of the blank line at the start of b (LF or CRLF).
func blankLen(b []byte) int {
	if b[0] == '\r' {
		return 2
	}
	return 1
}

// reqParser parses a request's head: a headParser (its strings and
// field names) whose lines may end in LF alone, as net/http reads them.
type reqParser struct {
	headParser
}

// line returns the next line without its LF or CRLF, and its offset.
func (p *reqParser) line() (line []byte, off int) {
	rest := p.head[p.pos:]
	i := bytes.IndexByte(rest, '\n')
	line, off = rest[:i], p.pos
	p.pos += i + 1
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	return line, off
}

// request is what the parser allocates for a request, at once.
type request struct {
	req  http.Request
	url  url.URL
	vals [8]string
}

func (p *reqParser) parse() (*http.Request, *requestError) {
	r := &request{}
	req := &r.req
	line, off := p.line()
	sp1, sp2, rerr := splitRequestLine(line)
	if rerr != nil {
		return nil, rerr
	}
	method, target, proto := line[:sp1], line[sp1+1:sp2], line[sp2+1:]
	req.Method = commonMethod(method)
	if req.Method == "" {
		req.Method = p.str(off, off+sp1)
	}
	if req.Method == http.MethodConnect {
		if rerr := checkTarget(method, target); rerr != nil {
			return nil, rerr // net/http's 400 comes first
		}
		return nil, refused(http.StatusMethodNotAllowed, "CONNECT is not served: this is an Open Service Broker API gateway")
	}
	req.RequestURI = p.str(off+sp1+1, off+sp2)
	// Any target url.ParseRequestURI takes, as net/http (an absolute
	// form of any scheme, too: "p:" came from the fuzzer).
	u, err := parseTarget(req.RequestURI, &r.url)
	if err != nil {
		return nil, badTarget(target, err)
	}
	req.URL = u
	// The version's syntax is splitRequestLine's; whether it is served
	// is checked after the target, as net/http checks it (after the
	// fields, too: a version it refuses then gets 505 before them here).
	switch string(proto) {
	case "HTTP/1.1":
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.1", 1, 1
	case "HTTP/1.0":
		req.Proto, req.ProtoMajor, req.ProtoMinor = "HTTP/1.0", 1, 0
	default:
		major, minor, _ := httpVersion(proto)
		if major != 1 {
			return nil, refused(http.StatusHTTPVersionNotSupported, "HTTP version %q is not supported: want HTTP/1.1 or HTTP/1.0", clip(proto))
		}
		// A later 1.x is served as 1.1 (RFC 9112 §2.3), as net/http
		// does (the fuzzer found HTTP/1.3 refused).
		req.Proto, req.ProtoMajor, req.ProtoMinor = p.str(off+sp2+1, off+len(line)), 1, minor
	}

	fields := bytes.Count(p.head[p.pos:], []byte{'\n'})
	values := r.vals[:]
	if fields > len(values) {
		values = make([]string, fields)
	}
	h := make(http.Header, fields)
	var host []string
	for p.pos < len(p.head) {
		line, off := p.line()
		if len(line) == 0 {
			return nil, refused(http.StatusBadRequest, "malformed header: an empty line within it")
		}
		if line[0] == ' ' || line[0] == '\t' {
			return nil, refused(http.StatusBadRequest, "folded header line %q: header fields must be on one line", clip(line))
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !tokenBytes(line[:colon]) {
			return nil, refused(http.StatusBadRequest, "malformed header line %q: want Name: value", clip(line))
		}
		v, voff := line[colon+1:], off+colon+1
		for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
			v, voff = v[1:], voff+1
		}
		for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
			v = v[:len(v)-1]
		}
		for _, b := range v {
			if !fieldValueByte(b) {
				return nil, refused(http.StatusBadRequest, "invalid byte %#x in the value of header %q", b, clip(line[:colon]))
			}
		}
		key := p.key(line[:colon], off)
		value := ""
		if len(v) > 0 {
			value = p.str(voff, voff+len(v))
		}
		if key == "Host" {
			host = append(host, value)
			continue
		}
		values = addValue(h, key, value, values)
	}
	req.Header = h
	// Pragma: no-cache implies Cache-Control: no-cache for an HTTP/1.0
	// cache (RFC 9111 §5.4); net/http adds it for the handler.
	if pr := h["Pragma"]; len(pr) > 0 && pr[0] == "no-cache" && h["Cache-Control"] == nil {
		h["Cache-Control"] = []string{"no-cache"}
	}

	switch {
	case len(host) > 1:
		return nil, refused(http.StatusBadRequest, "%d Host headers: want one", len(host))
	case len(host) == 0 && req.ProtoMinor >= 1:
		return nil, refused(http.StatusBadRequest, "missing Host header: HTTP/1.1 requires one")
	case len(host) == 1 && !httpguts.ValidHostHeader(host[0]):
		return nil, refused(http.StatusBadRequest, "malformed Host header %q", clip([]byte(host[0])))
	}
	req.Host = u.Host
	if req.Host == "" && len(host) == 1 {
		req.Host = host[0]
	}

	if te, ok := h["Transfer-Encoding"]; ok {
		switch {
		case req.ProtoMinor == 0:
			return nil, refused(http.StatusBadRequest, "Transfer-Encoding on an HTTP/1.0 request")
		case len(te) != 1 || !tokenEqual(te[0], "chunked"):
			return nil, refused(http.StatusNotImplemented, "unsupported transfer encoding %q: want chunked", clip([]byte(te[len(te)-1])))
		case h["Content-Length"] != nil:
			return nil, refused(http.StatusBadRequest, "both Transfer-Encoding and Content-Length: the request's length is ambiguous")
		}
		delete(h, "Transfer-Encoding")
		req.TransferEncoding = chunkedTE
		req.ContentLength = -1
	} else if cl := h["Content-Length"]; cl != nil {
		for _, v := range cl[1:] {
			if v != cl[0] {
				return nil, refused(http.StatusBadRequest, "%d different Content-Length headers: want one", len(cl))
			}
		}
		n, ok := parseLength([]byte(cl[0]))
		if !ok {
			return nil, refused(http.StatusBadRequest, "bad Content-Length %q: want a number of bytes", clip([]byte(cl[0])))
		}
		if len(cl) > 1 {
			h["Content-Length"] = cl[:1]
		}
		req.ContentLength = n
	}

	conn := h["Connection"]
	if req.ProtoMinor == 0 {
		req.Close = containsToken(conn, "close") || !containsToken(conn, "keep-alive")
	} else {
		req.Close = containsToken(conn, "close")
	}
	return req, nil
}

var chunkedTE = []string{"chunked"}

// clip is b for an error's description, cut to 64 bytes.
func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:64]) + "..."
	}
	return string(b)
}
