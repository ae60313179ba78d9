package lean

// HTTP/1.1's grammar, as the answer's reader (resread.go) and the server's
// request reader (server_req.go) both read it: tokens, field values,
// Content-Length, token lists, and a head's values in one backing array.

import (
	"net/http"
)

// addValue adds value to h[key]; a new key's slice is cut from values
// (one backing array for all of a head's values), and addValue returns
// what is left of it.
func addValue(h http.Header, key, value string, values []string) []string {
	if vv := h[key]; vv != nil {
		h[key] = append(vv, value)
		return values
	}
	vv := values[:1:1]
	vv[0] = value
	h[key] = vv
	return values[1:]
}

// parseLength parses a Content-Length of 1 to 18 digits.
func parseLength(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// containsToken reports whether a comma-separated element of one of vv
// is token, ASCII case aside (httpguts.HeaderValuesContainsToken).
func containsToken(vv []string, token string) bool {
	for _, v := range vv {
		for {
			elem, rest, more := cutByte(v, ',')
			if tokenEqual(trimOWS(elem), token) {
				return true
			}
			if !more {
				break
			}
			v = rest
		}
	}
	return false
}

func cutByte(s string, sep byte) (before, after string, found bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// tokenEqual compares s to the lower-case ASCII token.
func tokenEqual(s, token string) bool {
	if len(s) != len(token) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != token[i] {
			return false
		}
	}
	return true
}

// tokenByte reports whether c may be in a token (a field name, a method).
func tokenByte(c byte) bool { return tokenTable[c] }

var tokenTable = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()

func tokenBytes(b []byte) bool {
	for _, c := range b {
		if !tokenByte(c) {
			return false
		}
	}
	return true
}

// fieldValueByte reports whether textproto accepts c in a field value:
// VCHAR, SP, HTAB and obs-text.
func fieldValueByte(c byte) bool {
	return c >= 0x20 && c != 0x7f || c == '\t'
}
