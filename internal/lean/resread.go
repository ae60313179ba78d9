package lean

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
)

// readResponse reads the answer at the head of br as http.ReadResponse
// would, when its header is whole in br's buffer and of the plain kind: an
// HTTP/1.0 or 1.1 final answer (2xx to 5xx) whose lines end in CRLF, with
// token field names, no folded lines, no Transfer-Encoding or Pragma, and
// one valid Content-Length unless the answer has no body (HEAD, 204, 304).
// Its Body is http.NoBody, or nil for a body of known length: then b,
// allocated with the answer, reads it (b.fixed) and is to be its Body. For
// any other answer it returns ok false having consumed nothing, and the
// caller uses http.ReadResponse.
func readResponse(br *bufio.Reader, req *http.Request) (res *http.Response, b *body, ok bool) {
	buf, _ := br.Peek(br.Buffered())
	end := bytes.Index(buf, crlfcrlf)
	if end < 0 {
		return nil, nil, false
	}
	p := headParser{head: buf[:end+2]}
	a, n, ok := p.parse(req)
	if !ok {
		return nil, nil, false
	}
	_, _ = br.Discard(end + 4)
	if n == 0 {
		a.res.Body = http.NoBody
		return &a.res, nil, true
	}
	a.body.fixed = fixedBody{br: br, n: n}
	return &a.res, &a.body, true
}

// answer is what readResponse allocates for an answer, at once.
type answer struct {
	res  http.Response
	body body
	vals [4]string // the header's values, when they are that few
}

var crlfcrlf = []byte("\r\n\r\n")

// headParser parses one answer's header; its strings are substrings of
// one copy of the header (block), made when a first one is needed.
type headParser struct {
	head  []byte // the status line and fields, each with its CRLF
	pos   int
	block string
}

// line returns the next line and its offset in head; ok false when it
// does not end in CRLF or holds a CR or LF of its own.
func (p *headParser) line() (line []byte, off int, ok bool) {
	rest := p.head[p.pos:]
	i := bytes.IndexByte(rest, '\n')
	if i < 1 || rest[i-1] != '\r' {
		return nil, 0, false
	}
	line, off = rest[:i-1], p.pos
	p.pos += i + 1
	return line, off, bytes.IndexByte(line, '\r') < 0
}

// str is head[from:to] as a string, a substring of block.
func (p *headParser) str(from, to int) string {
	if p.block == "" {
		p.block = string(p.head)
	}
	return p.block[from:to]
}

// parse parses the header into a new answer; n is the length of its body
// (0: none).
func (p *headParser) parse(req *http.Request) (a *answer, n int64, ok bool) {
	a = &answer{res: http.Response{Request: req}}
	res := &a.res
	if !p.statusLine(res) {
		return nil, 0, false
	}
	fields := bytes.Count(p.head[p.pos:], []byte{'\n'})
	values := a.vals[:]
	if fields > len(values) {
		values = make([]string, fields)
	}
	h := make(http.Header, fields)
	var cl []byte // the Content-Length's value
	for p.pos < len(p.head) {
		line, off, ok := p.line()
		if !ok || line[0] == ' ' || line[0] == '\t' {
			return nil, 0, false // folded, or malformed: ReadResponse's error
		}
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 || !tokenBytes(line[:colon]) {
			return nil, 0, false
		}
		v, voff := line[colon+1:], off+colon+1
		for _, c := range v {
			if !fieldValueByte(c) {
				return nil, 0, false
			}
		}
		for len(v) > 0 && (v[0] == ' ' || v[0] == '\t') {
			v, voff = v[1:], voff+1
		}
		for len(v) > 0 && (v[len(v)-1] == ' ' || v[len(v)-1] == '\t') {
			v = v[:len(v)-1]
		}
		key := p.key(line[:colon], off)
		switch key {
		case "Transfer-Encoding", "Pragma":
			return nil, 0, false
		case "Content-Length":
			if cl != nil {
				return nil, 0, false // ReadResponse's error, or its deduplication
			}
			cl = v
		}
		value := ""
		if len(v) > 0 {
			value = p.str(voff, voff+len(v))
		}
		values = addValue(h, key, value, values)
	}
	res.Header = h
	conn := h["Connection"]
	hasClose := containsToken(conn, "close")
	if res.ProtoMinor == 0 {
		res.Close = hasClose || !containsToken(conn, "keep-alive")
	} else {
		res.Close = hasClose
		if hasClose {
			delete(h, "Connection")
		}
	}
	n = -1
	if cl != nil {
		var ok bool
		if n, ok = parseLength(cl); !ok {
			return nil, 0, false
		}
	}
	switch {
	case req.Method == http.MethodHead:
		res.ContentLength = n
	case res.StatusCode == http.StatusNoContent || res.StatusCode == http.StatusNotModified:
		res.ContentLength = 0
	case n < 0:
		return nil, 0, false // the body ends with the connection
	default:
		res.ContentLength = n
		return a, n, true
	}
	return a, 0, true
}

// statusLine parses "HTTP/1.x NNN reason" into res, for NNN 200 and up.
func (p *headParser) statusLine(res *http.Response) bool {
	line, _, ok := p.line()
	if !ok || len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' ||
		len(line) > 12 && line[12] != ' ' {
		return false
	}
	switch line[7] {
	case '1':
		res.Proto, res.ProtoMajor, res.ProtoMinor = "HTTP/1.1", 1, 1
	case '0':
		res.Proto, res.ProtoMajor, res.ProtoMinor = "HTTP/1.0", 1, 0
	default:
		return false
	}
	code := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return false
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 {
		return false // 1xx (and 0xx): ReadResponse
	}
	res.StatusCode = code
	if s, ok := commonStatus[string(line[9:])]; ok {
		res.Status = s
	} else {
		res.Status = p.str(9, len(line))
	}
	return true
}

// key is the canonical form of the field name k at off in head
// (textproto.CanonicalMIMEHeaderKey), without a new string when it is a
// common one or already canonical.
func (p *headParser) key(k []byte, off int) string {
	if s, ok := commonKeys[string(k)]; ok {
		return s
	}
	if canonicalKey(k) {
		return p.str(off, off+len(k))
	}
	var a [64]byte
	b := a[:0]
	if len(k) > len(a) {
		b = make([]byte, 0, len(k))
	}
	upper := true
	for _, c := range k {
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
		upper = c == '-'
	}
	if s, ok := commonKeys[string(b)]; ok {
		return s
	}
	return string(b)
}

// commonKeys maps common field names, canonical and lower case, to their
// canonical strings.
var commonKeys = func() map[string]string {
	m := make(map[string]string)
	for _, k := range []string{
		"Accept-Ranges", "Age", "Cache-Control", "Connection", "Content-Encoding",
		"Content-Language", "Content-Length", "Content-Type", "Date", "Etag",
		"Expires", "Keep-Alive", "Last-Modified", "Location", "Pragma", "Retry-After",
		"Server", "Set-Cookie", "Strict-Transport-Security", "Trailer",
		"Transfer-Encoding", "Vary", "Www-Authenticate", "X-Content-Type-Options",
		"X-Broker-Api-Version", "X-Broker-Api-Request-Identity", "X-Request-Id",
		"Traceparent", "Tracestate", "X-Powered-By",
		// Requests' (lean.Server):
		"Host", "Authorization", "X-Broker-Api-Originating-Identity", "User-Agent",
		"Accept", "Accept-Encoding", "Expect", "X-Forwarded-For", "X-Forwarded-Proto",
		"X-Forwarded-Host", "X-Real-Ip", "Forwarded", "Baggage",
	} {
		m[k] = k
		m[string(bytes.ToLower([]byte(k)))] = k
	}
	// As Cloud Controller and the OSB clients spell them.
	for _, k := range []string{"X-Broker-API-Version", "X-Broker-API-Originating-Identity", "X-Broker-API-Request-Identity"} {
		m[k] = http.CanonicalHeaderKey(k)
	}
	return m
}()

// commonStatus maps common status lines' codes and reasons to strings.
var commonStatus = func() map[string]string {
	m := make(map[string]string)
	for _, code := range []int{200, 201, 202, 204, 304, 400, 401, 403, 404, 409, 410, 412, 422, 429, 500, 502, 503, 504} {
		s := http.StatusText(code)
		k := string([]byte{byte('0' + code/100), byte('0' + code/10%10), byte('0' + code%10)}) + " " + s
		m[k] = k
	}
	return m
}()

// fixedBody reads the n bytes of an answer's body from br as the body
// http.ReadResponse gives does: io.EOF with the last bytes, and
// io.ErrUnexpectedEOF when the connection ends before them.
type fixedBody struct {
	br     *bufio.Reader
	n      int64 // bytes left
	sawEOF bool
}

func (f *fixedBody) Read(p []byte) (int, error) {
	if f.sawEOF || f.n <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > f.n {
		p = p[:f.n]
	}
	n, err := f.br.Read(p)
	f.n -= int64(n)
	if err == io.EOF {
		f.sawEOF = true
		if f.n > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	if err == nil && n > 0 && f.n == 0 {
		err, f.sawEOF = io.EOF, true
	}
	return n, err
}
