package lean

// The request line: net/http's checks of it, in its order and with its
// answers, made as soon as the line is whole (badFirstLine).

import (
	"bytes"
	"net/http"
	"net/url"
	"strings"
)

// splitRequestLine returns the offsets of the two spaces of a request
// line, cut at its first two spaces (METHOD TARGET VERSION) as net/http's
// server cuts it, or its refusal, with net/http's checks of the line
// before the target's (checkTarget), in its order and with its status
// (400): the shape (an HTTP/0.9 "GET /", a line of tabs or an empty line
// has none), the method (a token) and the version's syntax (HTTP/d.d;
// "GET / " has an empty one, "GET / HTTP/1.1 x" and "GET  / HTTP/1.1"
// malformed ones). Whether the server supports the version is parse's.
func splitRequestLine(line []byte) (sp1, sp2 int, rerr *requestError) {
	sp1 = bytes.IndexByte(line, ' ')
	if sp1 >= 0 {
		sp2 = bytes.IndexByte(line[sp1+1:], ' ')
	}
	if sp1 < 0 || sp2 < 0 {
		return 0, 0, refused(http.StatusBadRequest, "malformed request line %q: want METHOD TARGET HTTP/1.1", clip(line))
	}
	sp2 += sp1 + 1
	if method := line[:sp1]; len(method) == 0 || !tokenBytes(method) {
		return 0, 0, refused(http.StatusBadRequest, "invalid method %q in request line %q: want a token such as GET", clip(method), clip(line))
	}
	if _, _, ok := httpVersion(line[sp2+1:]); !ok {
		return 0, 0, refused(http.StatusBadRequest, "malformed HTTP version %q in request line %q: want HTTP/1.1 or HTTP/1.0", clip(line[sp2+1:]), clip(line))
	}
	return sp1, sp2, nil
}

// httpVersion is http.ParseHTTPVersion on bytes: "HTTP/" and a digit,
// a dot and a digit.
func httpVersion(v []byte) (major, minor int, ok bool) {
	if len(v) != len("HTTP/1.1") || string(v[:5]) != "HTTP/" || v[6] != '.' ||
		v[5] < '0' || v[5] > '9' || v[7] < '0' || v[7] > '9' {
		return 0, 0, false
	}
	return int(v[5] - '0'), int(v[7] - '0'), true
}

// checkTarget refuses a request target as net/http's server does before
// it reads the fields: what url.ParseRequestURI refuses, with a CONNECT's
// authority read as "http://" and it.
func checkTarget(method, target []byte) *requestError {
	if len(target) > 0 && target[0] == '/' && pathTargetOK(target) {
		return nil // with no allocation
	}
	t := string(target)
	if string(method) == http.MethodConnect && !strings.HasPrefix(t, "/") {
		t = "http://" + t
	}
	if _, err := url.ParseRequestURI(t); err != nil {
		return badTarget(target, err)
	}
	return nil
}

// pathTargetOK reports whether url.ParseRequestURI takes target, which
// starts with "/": no control byte in it, and each "%" of its path
// followed by two hex digits (a query's escapes are not checked). Those
// are the only errors it has for such a target (FuzzCheckTarget).
func pathTargetOK(target []byte) bool {
	inPath := true
	for i := 0; i < len(target); i++ {
		switch c := target[i]; {
		case c < ' ' || c == 0x7f:
			return false
		case c == '?':
			inPath = false
		case c == '%' && inPath:
			if i+2 >= len(target) || !isHex(target[i+1]) || !isHex(target[i+2]) {
				return false
			}
		}
	}
	return true
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func badTarget(target []byte, err error) *requestError {
	return refused(http.StatusBadRequest, "invalid request target %q: want a path such as /v2/catalog (%v)", clip(target), err)
}

// badFirstLine refuses a head whose request line is whole in buf and
// malformed, before the rest of the head comes, as net/http reads and
// checks the request line first (splitRequestLine, checkTarget): a client
// that sent "GET /\r\n" or "GET / \r\n" and waits gets its 400 at once
// rather than at the header timeout. nil when the line is not whole yet,
// or well formed.
func badFirstLine(buf []byte) *requestError {
	i := bytes.IndexByte(buf, '\n')
	if i < 0 {
		return nil
	}
	line := buf[:i]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	}
	sp1, sp2, rerr := splitRequestLine(line)
	if rerr != nil {
		return rerr
	}
	return checkTarget(line[:sp1], line[sp1+1:sp2])
}

// parseTarget parses a request target as net/http's server does
// (url.ParseRequestURI), into u when it is a plain path with an optional
// query.
func parseTarget(target string, u *url.URL) (*url.URL, error) {
	if len(target) > 0 && target[0] == '/' && plainPath(target) {
		path, query, _ := cutByte(target, '?')
		u.Path, u.RawQuery = path, query
		u.ForceQuery = query == "" && len(path) < len(target)
		return u, nil
	}
	return url.ParseRequestURI(target)
}

// plainPath reports whether url.ParseRequestURI would give target's path
// as it is (no escapes, no byte that url would escape, so no RawPath) and
// its query as it is: bytes of the path unreserved or allowed in a path
// unescaped, and no control byte anywhere (ParseRequestURI's error).
func plainPath(target string) bool {
	inPath := true
	for i := 0; i < len(target); i++ {
		c := target[i]
		if c < ' ' || c == 0x7f {
			return false
		}
		if !inPath {
			continue
		}
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-' || c == '_' || c == '.' || c == '~' || c == '/':
		case c == '$' || c == '&' || c == '+' || c == ',' || c == ':' || c == ';' || c == '=' || c == '@':
		case c == '?':
			inPath = false
		default:
			return false
		}
	}
	return true
}

// commonMethod returns the method's string without an allocation when it
// is a common one, else "".
func commonMethod(m []byte) string {
	switch string(m) {
	case "GET":
		return http.MethodGet
	case "PUT":
		return http.MethodPut
	case "PATCH":
		return http.MethodPatch
	case "DELETE":
		return http.MethodDelete
	case "POST":
		return http.MethodPost
	case "HEAD":
		return http.MethodHead
	case "OPTIONS":
		return http.MethodOptions
	case "CONNECT":
		return http.MethodConnect
	}
	return ""
}
