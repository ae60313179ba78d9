package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// GenesisHash is the prev_hash of the first record of a chain: of a new
// file with no predecessor, and of every process start on standard output.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// hashMember is how the hash member starts; it is the last member of a
// line: ,"hash":"<64 hex digits>"}
const hashMember = `,"hash":"`

// hashSuffixLen is the length of the hash member with the closing brace.
const hashSuffixLen = len(hashMember) + 64 + len(`"}`)

// lineHash returns the hex SHA-256 of a line (without its newline): the
// next record's prev_hash.
func lineHash(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

// encode encodes r with a placeholder prev_hash and no hash: the body
// that chain completes.
func encode(r *Record) ([]byte, error) {
	c := *r
	c.PrevHash, c.Hash = GenesisHash, ""
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&c); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// chain puts prev into an encoded body's prev_hash (its last member) and
// appends the hash member: the SHA-256 of the body. It returns the line
// without a newline; body is overwritten.
func chain(body []byte, prev string) []byte {
	copy(body[len(body)-2-len(GenesisHash):], prev) // ..."prev_hash":"<64>"}
	sum := sha256.Sum256(body)
	line := make([]byte, 0, len(body)+hashSuffixLen+1)
	line = append(line, body[:len(body)-1]...)
	line = append(line, hashMember...)
	line = hex.AppendEncode(line, sum[:])
	return append(line, `"}`...)
}

// seal encodes r chained to prev: encode and chain.
func seal(r *Record, prev string) ([]byte, error) {
	body, err := encode(r)
	if err != nil {
		return nil, err
	}
	return chain(body, prev), nil
}

// checkLine checks one line of a chain: that it is a record, that its
// hash matches its content and that its prev_hash is prev. It returns the
// hash the next record must name, and what is wrong ("" when nothing).
func checkLine(line []byte, prev string) (next string, problem string) {
	next = lineHash(line)
	n := len(line)
	if n < hashSuffixLen+2 || !bytes.Equal(line[n-hashSuffixLen:n-hashSuffixLen+len(hashMember)], []byte(hashMember)) ||
		line[n-2] != '"' || line[n-1] != '}' {
		if !json.Valid(line) {
			return next, "not a complete JSON record (torn write, or edited)"
		}
		return next, "has no hash member at its end"
	}
	var r struct {
		PrevHash *string `json:"prev_hash"`
		Hash     string  `json:"hash"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return next, fmt.Sprintf("not valid JSON (%v)", err)
	}
	body := make([]byte, 0, n-hashSuffixLen+1)
	body = append(append(body, line[:n-hashSuffixLen]...), '}')
	if sum := sha256.Sum256(body); hex.EncodeToString(sum[:]) != r.Hash {
		return next, "its content does not match its hash (the record was edited)"
	}
	switch {
	case r.PrevHash == nil:
		return next, "has no prev_hash"
	case prev != "" && *r.PrevHash != prev:
		return next, fmt.Sprintf("its prev_hash %.12s… is not the hash of the record before it, %.12s… (a record was removed, inserted or reordered before it)", *r.PrevHash, prev)
	}
	return next, ""
}
