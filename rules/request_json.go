package rules

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// objMember is one member of a JSON object, as byte offsets into the document.
type objMember struct {
	keyStart, keyEnd int // the key's string token, quotes included
	valStart, valEnd int // the value
}

// key returns the member's key, unescaped.
func (m objMember) key(doc []byte) string {
	return unquoteJSON(doc[m.keyStart:m.keyEnd])
}

// is reports whether the member's key is key, without allocating for keys
// sent without escapes.
func (m objMember) is(doc []byte, key string) bool {
	raw := doc[m.keyStart+1 : m.keyEnd-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw) == key
	}
	return m.key(doc) == key
}

// unquoteJSON returns the string a valid JSON string token stands for, as
// encoding/json decodes it (invalid UTF-8 becomes U+FFFD). Tokens without
// escapes, the common case, take a fast path.
func unquoteJSON(tok []byte) string {
	if len(tok) >= 2 && bytes.IndexByte(tok, '\\') < 0 && utf8.Valid(tok) {
		return string(tok[1 : len(tok)-1])
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil && len(tok) >= 2 {
		return string(tok[1 : len(tok)-1])
	}
	return s
}

// objectMembers lists the members of the JSON object whose "{" is at
// doc[open], and returns the offset of its closing "}". It expects valid
// JSON (callers decode the document first); on anything else it stops early
// and reports ok false, but never panics.
func objectMembers(doc []byte, open int) (ms []objMember, closing int, ok bool) {
	return appendObjectMembers(nil, doc, open)
}

// appendObjectMembers is objectMembers appending to ms, so that a caller
// can lend a buffer on its stack.
func appendObjectMembers(ms []objMember, doc []byte, open int) (_ []objMember, closing int, ok bool) {
	if open >= len(doc) || doc[open] != '{' {
		return nil, 0, false
	}
	i := skipJSONSpace(doc, open+1)
	for i < len(doc) && doc[i] != '}' {
		if doc[i] == ',' {
			i = skipJSONSpace(doc, i+1)
			continue
		}
		if doc[i] != '"' {
			return ms, 0, false
		}
		m := objMember{keyStart: i, keyEnd: skipJSONString(doc, i)}
		i = skipJSONSpace(doc, m.keyEnd)
		if i >= len(doc) || doc[i] != ':' {
			return ms, 0, false
		}
		m.valStart = skipJSONSpace(doc, i+1)
		m.valEnd = skipJSONValue(doc, m.valStart)
		if m.valEnd <= m.valStart {
			return ms, 0, false
		}
		ms = append(ms, m)
		i = skipJSONSpace(doc, m.valEnd)
	}
	if i >= len(doc) {
		return ms, 0, false
	}
	return ms, i, true
}

// duplicateKeys returns the keys that occur more than once among ms, the
// members of an object of doc, each once, in order of their second
// occurrence. Keys compare as encoding/json decodes them, so
// "pl\u0061n_id" is "plan_id".
func duplicateKeys(doc []byte, ms []objMember) []string {
	if len(ms) < 2 {
		return nil
	}
	escaped := false
	for _, m := range ms {
		raw := doc[m.keyStart:m.keyEnd]
		escaped = escaped || bytes.IndexByte(raw, '\\') >= 0 || !utf8.Valid(raw)
	}
	var dups []string
	if !escaped && len(ms) <= 32 { // the common case: compare the keys as sent
		for i, m := range ms {
			for _, prev := range ms[:i] {
				if bytes.Equal(doc[m.keyStart:m.keyEnd], doc[prev.keyStart:prev.keyEnd]) {
					if k := m.key(doc); !slices.Contains(dups, k) {
						dups = append(dups, k)
					}
					break
				}
			}
		}
		return dups
	}
	seen := make(map[string]int, len(ms))
	for _, m := range ms {
		k := m.key(doc)
		seen[k]++
		if seen[k] == 2 {
			dups = append(dups, k)
		}
	}
	return dups
}

// memberList holds the members of an object of a document, looked up by
// key without building a map: a response body is checked once, for a few
// keys. The document is passed apart, so that a list on the stack stays
// there.
type memberList []objMember

// get returns the value of the member of doc named name, a slice of doc
// capped so that appending to it copies it. Of duplicate keys the last
// wins, as with encoding/json.
func (ms memberList) get(doc []byte, name string) (json.RawMessage, bool) {
	for i := len(ms) - 1; i >= 0; i-- {
		mb := ms[i]
		raw := doc[mb.keyStart:mb.keyEnd]
		same := len(raw) == len(name)+2 && string(raw[1:len(raw)-1]) == name
		if !same && bytes.IndexByte(raw, '\\') >= 0 { // rare: an escaped key
			same = unquoteJSON(raw) == name
		}
		if same {
			return doc[mb.valStart:mb.valEnd:mb.valEnd], true
		}
	}
	return nil, false
}

// membersMap returns the members ms of an object of doc by key, the values
// as slices of doc (capped, so that appending to one copies it). Of
// duplicate keys the last wins, as with encoding/json.
func membersMap(doc []byte, ms []objMember) map[string]json.RawMessage {
	m := make(map[string]json.RawMessage, len(ms))
	for _, mb := range ms {
		m[mb.key(doc)] = doc[mb.valStart:mb.valEnd:mb.valEnd]
	}
	return m
}

// isJSONSpace reports whether c is JSON whitespace.
func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// skipJSONSpace returns the offset of the first non-whitespace byte at or after i.
func skipJSONSpace(doc []byte, i int) int {
	for i < len(doc) && isJSONSpace(doc[i]) {
		i++
	}
	return i
}

// skipJSONString returns the offset just after the string token at doc[i].
func skipJSONString(doc []byte, i int) int {
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

// skipJSONValue returns the offset just after the JSON value at doc[i].
func skipJSONValue(doc []byte, i int) int {
	if i >= len(doc) {
		return i
	}
	switch doc[i] {
	case '"':
		return skipJSONString(doc, i)
	case '{', '[':
		depth := 0
		for i < len(doc) {
			switch doc[i] {
			case '"':
				i = skipJSONString(doc, i)
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
	for i < len(doc) && !isJSONSpace(doc[i]) && doc[i] != ',' && doc[i] != '}' && doc[i] != ']' {
		i++
	}
	return i
}
