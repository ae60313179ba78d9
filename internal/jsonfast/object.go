package jsonfast

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// Member is one member of a JSON object, as byte offsets into the document.
type Member struct {
	KeyStart, KeyEnd int // the key's string token, quotes included
	ValStart, ValEnd int // the value
}

// Key returns the member's key, unescaped.
func (m Member) Key(doc []byte) string {
	return Unquote(doc[m.KeyStart:m.KeyEnd])
}

// Is reports whether the member's key is key, without allocating for keys
// sent without escapes.
func (m Member) Is(doc []byte, key string) bool {
	raw := doc[m.KeyStart+1 : m.KeyEnd-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw) == key
	}
	return m.Key(doc) == key
}

// Value returns the member's value, a slice of doc capped so that
// appending to it copies it.
func (m Member) Value(doc []byte) json.RawMessage {
	return doc[m.ValStart:m.ValEnd:m.ValEnd]
}

// Unquote returns the string a valid JSON string token stands for, as
// json.Unmarshal into a string decodes it (invalid UTF-8 becomes U+FFFD).
// Tokens without escapes, the common case, take a fast path: measured
// (BenchmarkUnquote), 5× faster than json.Unmarshal, 1 allocation (the
// string) instead of 3. On a token that is not a valid JSON string it
// returns the token without its first and last bytes, unchanged.
func Unquote(tok []byte) string {
	if len(tok) >= 2 && bytes.IndexByte(tok, '\\') < 0 && utf8.Valid(tok) {
		return string(tok[1 : len(tok)-1])
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil && len(tok) >= 2 {
		return string(tok[1 : len(tok)-1])
	}
	return s
}

// Object is the members of one JSON object, in document order; a
// member's offsets are into the document the object was read from, which
// every method takes apart, so that an Object on the stack stays there.
type Object []Member

// ObjectMembers lists the members of the JSON object whose "{" is at
// doc[open], and returns the offset of its closing "}". It expects valid
// JSON (callers check the document first); on anything else it stops early
// and reports ok false, but never panics. Measured (BenchmarkObjectMembers,
// a last_operation answer, into a buffer on the stack, then Get): 18–26×
// faster than json.Unmarshal into a map[string]json.RawMessage, 0
// allocations instead of 15.
func ObjectMembers(doc []byte, open int) (ms Object, closing int, ok bool) {
	return AppendObjectMembers(nil, doc, open)
}

// AppendObjectMembers is ObjectMembers appending to ms, so that a caller
// can lend a buffer on its stack.
func AppendObjectMembers(ms Object, doc []byte, open int) (_ Object, closing int, ok bool) {
	if open >= len(doc) || doc[open] != '{' {
		return nil, 0, false
	}
	i := SkipSpace(doc, open+1)
	for i < len(doc) && doc[i] != '}' {
		if doc[i] == ',' {
			i = SkipSpace(doc, i+1)
			continue
		}
		if doc[i] != '"' {
			return ms, 0, false
		}
		m := Member{KeyStart: i, KeyEnd: skipString(doc, i)}
		i = SkipSpace(doc, m.KeyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return ms, 0, false
		}
		m.ValStart = SkipSpace(doc, i+1)
		m.ValEnd = skipValue(doc, m.ValStart)
		if m.ValEnd <= m.ValStart {
			return ms, 0, false
		}
		ms = append(ms, m)
		i = SkipSpace(doc, m.ValEnd)
	}
	if i >= len(doc) {
		return ms, 0, false
	}
	return ms, i, true
}

// Get returns the value of the member of doc named name (see
// Member.Value). Of duplicate keys the last wins, as with encoding/json.
func (o Object) Get(doc []byte, name string) (json.RawMessage, bool) {
	// A key is name as sent, or once unescaped, or once its invalid UTF-8
	// is replaced by U+FFFD (EF BF BD), which only a name holding U+FFFD
	// can match.
	replaced := strings.IndexByte(name, 0xEF) >= 0
	for i := len(o) - 1; i >= 0; i-- {
		mb := o[i]
		raw := doc[mb.KeyStart:mb.KeyEnd]
		same := len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name
		if !same && (replaced || bytes.IndexByte(raw, '\\') >= 0) { // rare
			same = Unquote(raw) == name
		}
		if same {
			return mb.Value(doc), true
		}
	}
	return nil, false
}

// LastFold returns the member whose key is name as encoding/json matches
// keys to struct fields: without regard to case (Unicode simple folding:
// the Kelvin sign is a "k"), the last of several winning. name is
// lower-case ASCII. Keys of ASCII without escapes, the common case, are
// compared in place, without allocating.
func (o Object) LastFold(doc []byte, name string) (Member, bool) {
	for i := len(o) - 1; i >= 0; i-- {
		if m := o[i]; m.IsFold(doc, name) {
			return m, true
		}
	}
	return Member{}, false
}

// IsFold reports whether m's key is name, lower-case ASCII, without regard
// to case, as encoding/json matches keys (see LastFold). Keys of ASCII
// without escapes, the common case, are compared in place.
func (m Member) IsFold(doc []byte, name string) bool {
	raw := doc[m.KeyStart+1 : m.KeyEnd-1]
	for _, c := range raw {
		if c >= utf8.RuneSelf || c == '\\' {
			return strings.EqualFold(m.Key(doc), name)
		}
	}
	if len(raw) != len(name) {
		return false
	}
	for i, c := range raw {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return false
		}
	}
	return true
}

// Map returns the members by key, the values as slices of doc (see
// Member.Value): what json.Unmarshal into a map[string]json.RawMessage
// returns, without copying the values. Of duplicate keys the last wins,
// as with encoding/json.
func (o Object) Map(doc []byte) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(o))
	for _, mb := range o {
		m[mb.Key(doc)] = mb.Value(doc)
	}
	return m
}

// DuplicateKeys returns the keys that occur more than once in the object,
// each once, in order of their second occurrence. Keys compare as
// encoding/json decodes them, so "pl\u0061n_id" is "plan_id".
func (o Object) DuplicateKeys(doc []byte) []string {
	if len(o) < 2 {
		return nil
	}
	escaped := false
	for _, m := range o {
		raw := doc[m.KeyStart:m.KeyEnd]
		escaped = escaped || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw)
	}
	var dups []string
	if !escaped && len(o) <= 32 { // the common case: compare the keys as sent
		for i, m := range o {
			for _, prev := range o[:i] {
				if bytes.Equal(doc[m.KeyStart:m.KeyEnd], doc[prev.KeyStart:prev.KeyEnd]) {
					if k := m.Key(doc); !slices.Contains(dups, k) {
						dups = append(dups, k)
					}
					break
				}
			}
		}
		return dups
	}
	seen := make(map[string]int, len(o))
	for _, m := range o {
		k := m.Key(doc)
		seen[k]++
		if seen[k] == 2 {
			dups = append(dups, k)
		}
	}
	return dups
}

// isSpace reports whether c is JSON white space.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// SkipSpace returns the offset of the first byte at or after i that is
// not JSON white space.
func SkipSpace(doc []byte, i int) int {
	for i < len(doc) && isSpace(doc[i]) {
		i++
	}
	return i
}

// skipString returns the offset just after the string token at doc[i].
func skipString(doc []byte, i int) int {
	for i++; i < len(doc); i++ {
		switch doc[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(doc)
}

// skipValue returns the offset just after the JSON value at doc[i].
func skipValue(doc []byte, i int) int {
	if i >= len(doc) {
		return i
	}
	switch doc[i] {
	case '"':
		return skipString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				i = skipString(doc, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(doc)
	}
	for i < len(doc) && !isSpace(doc[i]) && doc[i] != ',' && doc[i] != '}' && doc[i] != ']' {
		i++
	}
	return i
}
