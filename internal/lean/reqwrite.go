package lean

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"reflect"
	"strconv"
	"strings"
)

// defaultUserAgent is what (*http.Request).Write sends when the request
// has no User-Agent header.
const defaultUserAgent = "Go-http-client/1.1"

// writeRequest writes req to bw as (*http.Request).Write would in
// meaning (the header fields in another order), without its sorting,
// formatting and allocations. It handles a request without a body, or
// with one of known length (ContentLength > 0); for any other it returns
// false, having written nothing, and the caller uses req.Write. When it
// returns true it has closed the body, as req.Write does.
func writeRequest(bw *bufio.Writer, req *http.Request) (bool, error) {
	if !fastWritable(req) {
		return false, nil
	}
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	path := req.URL.EscapedPath()
	if path == "" {
		path = "/"
	}
	if !plainHost(host) || hasCTL(path) || hasCTL(req.URL.RawQuery) {
		return false, nil
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	length := req.ContentLength
	if noBody(req) {
		length = 0
	}

	// The header goes in bw's free space (or a larger copy), then to bw
	// once whole: until then writeRequest may still leave req to req.Write.
	b := bw.AvailableBuffer()
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	if req.URL.ForceQuery || req.URL.RawQuery != "" {
		b = append(b, '?')
		b = append(b, req.URL.RawQuery...)
	}
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)

	// Empty to send none (ReverseProxy sets it so), absent for Go's.
	ua := defaultUserAgent
	if vv, ok := req.Header["User-Agent"]; ok {
		ua = ""
		if len(vv) > 0 {
			ua = vv[0]
		}
	}
	if ua != "" {
		b = appendField(b, "User-Agent", ua)
	}
	if req.Close {
		b = append(b, "Connection: close\r\n"...) // fastWritable: no Connection header
	}
	if length > 0 || length == 0 && (method == "POST" || method == "PUT" || method == "PATCH") {
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, length, 10)
		b = append(b, "\r\n"...)
	}
	for k, vv := range req.Header {
		switch k {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue // written above from the request's fields, or never
		}
		if !canonicalKey(k) {
			if validFieldName(k) {
				// It may have a canonical twin, whose values net/http
				// sends in the order of its sorted keys.
				return false, nil
			}
			continue
		}
		if !validFieldName(k) {
			continue // as net/http: dropped
		}
		for _, v := range vv {
			b = appendField(b, k, v)
		}
	}
	b = append(b, "\r\n"...)
	_, err := bw.Write(b)
	if length > 0 && err == nil {
		err = writeBody(bw, req.Body, length)
	}
	if cerr := closeReqBody(req); err == nil {
		err = cerr
	}
	return true, err
}

// fastWritable reports whether writeRequest may handle req: no trailer,
// no transfer coding of its own, no body or one of known length, not
// CONNECT, no Opaque URL, no Connection header when req.Close asks for
// one, and no trace that wants to hear of the header fields written.
// (writeRequest also leaves to req.Write a header with a non-canonical
// field name.)
func fastWritable(req *http.Request) bool {
	if req.Trailer != nil || req.TransferEncoding != nil || req.Method == "CONNECT" || req.URL.Opaque != "" {
		return false
	}
	if !noBody(req) && req.ContentLength <= 0 || req.Body == nil && req.ContentLength != 0 {
		return false // chunked, a probe of the body, or req.Write's error
	}
	if req.Close && req.Header["Connection"] != nil {
		return false
	}
	if req.Method != "" && !validToken(req.Method) {
		return false
	}
	if tr := httptrace.ContextClientTrace(req.Context()); tr != nil &&
		(tr.WroteHeaderField != nil || tr.WroteHeaders != nil || tr.WroteRequest != nil) {
		return false
	}
	return true
}

// appendField appends "k: v\r\n" with v as net/http sends it: ASCII white
// space trimmed at both ends, CR and LF within replaced by spaces.
func appendField(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, ": "...)
	v = trimSpace(v)
	if strings.IndexByte(v, '\n') < 0 && strings.IndexByte(v, '\r') < 0 {
		b = append(b, v...)
	} else {
		for i := 0; i < len(v); i++ {
			c := v[i]
			if c == '\r' || c == '\n' {
				c = ' '
			}
			b = append(b, c)
		}
	}
	return append(b, "\r\n"...)
}

// writeBody copies the n bytes of body to bw, then reads what body has
// beyond them, as net/http does: a body of another length is an error.
func writeBody(bw *bufio.Writer, body io.Reader, n int64) error {
	if !inMemory(body) {
		// The broker may need the header before the body comes (net/http
		// flushes too).
		if err := bw.Flush(); err != nil {
			return err
		}
	}
	if r, ok := unwrapNopCloser(body); ok {
		body = r
	}
	var copied int64
	for copied < n {
		if bw.Available() == 0 {
			if err := bw.Flush(); err != nil {
				return err
			}
		}
		buf := bw.AvailableBuffer()
		buf = buf[:min(int64(cap(buf)), n-copied)]
		m, err := body.Read(buf)
		if m > 0 {
			if _, werr := bw.Write(buf[:m]); werr != nil {
				return werr
			}
			copied += int64(m)
		}
		if err == io.EOF {
			return fmt.Errorf("http: ContentLength=%d with Body length %d", n, copied)
		}
		if err != nil {
			return err
		}
	}
	extra, err := io.Copy(io.Discard, body)
	if err != nil {
		return err
	}
	if extra > 0 {
		return fmt.Errorf("http: ContentLength=%d with Body length %d", n, n+extra)
	}
	return nil
}

func closeReqBody(req *http.Request) error {
	if req.Body == nil {
		return nil
	}
	return req.Body.Close()
}

var (
	nopCloserType         = reflect.TypeOf(io.NopCloser(nil))
	nopCloserWriterToType = reflect.TypeOf(io.NopCloser(struct {
		io.Reader
		io.WriterTo
	}{}))
)

// unwrapNopCloser returns the reader inside an io.NopCloser.
func unwrapNopCloser(r io.Reader) (io.Reader, bool) {
	switch reflect.TypeOf(r) {
	case nopCloserType, nopCloserWriterToType:
		inner, _ := reflect.ValueOf(r).Field(0).Interface().(io.Reader)
		return inner, inner != nil
	}
	return nil, false
}

// inMemory reports whether r never blocks: net/http does not flush the
// header before such a body.
func inMemory(r io.Reader) bool {
	switch r.(type) {
	case *bytes.Reader, *bytes.Buffer, *strings.Reader:
		return true
	}
	if inner, ok := unwrapNopCloser(r); ok {
		return inMemory(inner)
	}
	return false
}

// trimSpace trims ASCII white space (textproto.TrimString).
func trimSpace(s string) string {
	for len(s) > 0 && isSpace(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

func isSpace(b byte) bool { return b == ' ' || b == '\t' || b == '\n' || b == '\r' }

// plainHost reports whether host is made only of bytes net/http sends
// unchanged (no IDNA, no zone, valid in a Host header).
func plainHost(host string) bool {
	for i := 0; i < len(host); i++ {
		switch b := host[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case b == '.' || b == '-' || b == ':' || b == '[' || b == ']' || b == '_':
		default:
			return false
		}
	}
	return true
}

// hasCTL reports whether s has a control byte, which net/http refuses in
// a request's URL.
func hasCTL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] == 0x7f {
			return true
		}
	}
	return false
}

// validToken reports whether s is a non-empty RFC 9110 token.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !tokenByte(s[i]) {
			return false
		}
	}
	return true
}

// canonicalKey reports whether the field name k is in canonical form
// (textproto.CanonicalMIMEHeaderKey).
func canonicalKey[S string | []byte](k S) bool {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return false
		}
		upper = c == '-'
	}
	return true
}

// validFieldName is httpguts.ValidHeaderFieldName.
func validFieldName(s string) bool { return validToken(s) }
