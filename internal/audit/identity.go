package audit

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// identityScratch is the size of the stack buffers DecodeIdentity decodes
// usual values in; larger ones are decoded on the heap.
const identityScratch = 512

// DecodeIdentity decodes an X-Broker-API-Originating-Identity value,
// "<platform> <base64 of a JSON object>", keeping the platform and the
// object's user_id or, failing that, username. It returns nil for an empty
// or malformed header.
//
// It decodes as json.Unmarshal into struct{UserID, Username any} would
// (the value is Undecodable when that fails; members are matched without
// regard to case; the last of a name wins; a user_id that is not a
// non-empty string gives way to username), without its allocations for
// the usual values: see userMembers.
func DecodeIdentity(header string) *Identity {
	platform, value, ok := strings.Cut(strings.TrimSpace(header), " ")
	if !ok || platform == "" || len(platform) > maxPlatformLen || !isToken(platform) {
		return nil
	}
	id := &Identity{Platform: platform}
	value = strings.TrimSpace(value)
	if len(value) > base64.StdEncoding.EncodedLen(maxIdentityJSON) {
		id.Undecodable = true
		return id
	}
	var in, out [identityScratch]byte
	raw, err := decodeBase64(value, in[:0], out[:0])
	if err != nil || !json.Valid(raw) {
		id.Undecodable = true
		return id
	}
	userID, username, found := userMembers(raw)
	switch found {
	case membersNotObject:
		id.Undecodable = true
		return id
	case membersUnusual:
		return decodeUser(id, bytes.Clone(raw)) // a copy: raw stays on the stack
	}
	if len(userID) > 0 {
		id.UserID = string(userID[:min(len(userID), maxUserLen)])
	} else if username != nil {
		id.Username = string(username[:min(len(username), maxUserLen)])
	}
	return id
}

// decodeUser sets id's user from raw with encoding/json.
func decodeUser(id *Identity, raw []byte) *Identity {
	var v struct {
		UserID   any `json:"user_id"`
		Username any `json:"username"`
	}
	if json.Unmarshal(raw, &v) != nil {
		id.Undecodable = true
		return id
	}
	if s, ok := v.UserID.(string); ok && s != "" {
		id.UserID = capLen(s, maxUserLen)
	} else if s, ok := v.Username.(string); ok {
		id.Username = capLen(s, maxUserLen)
	}
	return id
}

// decodeBase64 decodes value, padded or not, as base64.StdEncoding's, then
// base64.RawStdEncoding's DecodeString would, into out (grown when too
// small); in is scratch space for value's bytes.
func decodeBase64(value string, in, out []byte) ([]byte, error) {
	src := append(in[:0], value...)
	n := base64.RawStdEncoding.DecodedLen(len(src)) // >= StdEncoding's
	dst := out[:0]
	if n > cap(dst) {
		dst = make([]byte, n)
	}
	dst = dst[:n]
	k, err := base64.StdEncoding.Decode(dst, src)
	if err != nil {
		k, err = base64.RawStdEncoding.Decode(dst, src)
	}
	return dst[:k], err
}

// What userMembers found.
const (
	// membersFound: the members' values, if any, are plain strings.
	membersFound = iota
	// membersNotObject: the value is neither an object nor null, which
	// json.Unmarshal refuses to decode into a struct.
	membersNotObject
	// membersUnusual: only encoding/json decodes the value exactly.
	membersUnusual
)

// userMembers returns the contents of the last user_id and username
// members of raw, valid JSON (nil: absent), matched as encoding/json
// matches struct fields: exactly or, for ASCII names, ignoring case. It
// gives up (membersUnusual) on what it does not decode as encoding/json
// does: a member name with escapes or non-ASCII bytes, or a user_id or
// username whose value is not a string of valid UTF-8 without escapes.
func userMembers(raw []byte) (userID, username []byte, found int) {
	i := skipSpace(raw, 0)
	switch {
	case i < len(raw) && raw[i] == 'n': // null: nothing set
		return nil, nil, membersFound
	case i >= len(raw) || raw[i] != '{':
		return nil, nil, membersNotObject
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil, nil, membersFound
	}
	for i < len(raw) && raw[i] == '"' {
		end := skipString(raw, i)
		name := raw[i+1 : end-1]
		for _, c := range name {
			if c == '\\' || c >= utf8.RuneSelf {
				return nil, nil, membersUnusual
			}
		}
		i = skipSpace(raw, end)
		if i >= len(raw) || raw[i] != ':' {
			return nil, nil, membersUnusual // not valid JSON: cannot happen
		}
		i = skipSpace(raw, i+1)
		end = skipValue(raw, i)
		isUserID, isUsername := equalFoldASCII(name, "user_id"), equalFoldASCII(name, "username")
		if isUserID || isUsername {
			v := raw[i:end]
			if len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0 || !utf8.Valid(v) {
				return nil, nil, membersUnusual
			}
			if isUserID {
				userID = v[1 : len(v)-1]
			} else {
				username = v[1 : len(v)-1]
			}
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return userID, username, membersFound
}

// equalFoldASCII reports whether name is s (lower-case ASCII) ignoring
// ASCII case.
func equalFoldASCII(name []byte, s string) bool {
	if len(name) != len(s) {
		return false
	}
	for i := range name {
		c := name[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// skipSpace returns the index of the first byte from i on that is not
// JSON white space.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the (valid JSON) value starting at
// b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
