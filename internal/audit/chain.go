package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
)

// GenesisHash is the prev_hash of the first record of a chain: of a new
// file with no predecessor, and of every process start on standard output.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// hashMember is how the hash member starts; it is the last member of a
// line: ,"hash":"<64 hex digits>"}
const hashMember = `,"hash":"`

// hashSuffixLen is the length of the hash member with the closing brace.
const hashSuffixLen = len(hashMember) + 64 + len(`"}`)

// maxPooledBuffer is the largest encode buffer kept for reuse.
const maxPooledBuffer = 32 << 10

// buffers holds encode buffers (*[]byte) for reuse.
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

func getBuffer() *[]byte { return buffers.Get().(*[]byte) }

// putBuffer returns b to the pool holding used, its contents grown or
// not, unless used is too large to keep.
func putBuffer(b *[]byte, used []byte) {
	if cap(used) > maxPooledBuffer {
		return
	}
	*b = used[:0]
	buffers.Put(b)
}

// encode appends r's body to dst: r encoded with keyID as its key_id
// ("": none, an unkeyed chain), GenesisHash as a placeholder prev_hash (its
// last member) and no hash, with room for the hash member and a newline.
func encode(dst []byte, r *Record, keyID string) ([]byte, error) {
	body, err := appendBody(dst, r, keyID)
	if err != nil {
		return nil, err
	}
	return slices.Grow(body, hashSuffixLen), nil // - "}" + hash member + "}\n"
}

// chain completes a body in place: it puts prev (64 hex digits) into its
// prev_hash, hashes the body with h (SHA-256, or HMAC-SHA256 for a keyed
// chain) and replaces the closing brace by the hash member, the brace and
// a newline. It returns the line and the hash (in hex), which the next
// record names as its prev_hash.
func chain(body []byte, prev *[64]byte, h *hasher) (line []byte, hash [64]byte) {
	copy(body[len(body)-2-len(GenesisHash):], prev[:]) // ..."prev_hash":"<64>"}
	h.sum(body, &hash)
	line = append(body[:len(body)-1], hashMember...)
	line = append(line, hash[:]...)
	return append(line, "\"}\n"...), hash
}

// hashOf returns the hash member at the end of a line (without its
// newline), or "" when the line does not end with one.
func hashOf(line []byte) string {
	n := len(line)
	if n < hashSuffixLen+2 || string(line[n-hashSuffixLen:n-hashSuffixLen+len(hashMember)]) != hashMember ||
		line[n-2] != '"' || line[n-1] != '}' {
		return ""
	}
	h := line[n-2-64 : n-2]
	for _, c := range h {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ""
		}
	}
	return string(h)
}

// lineCheck is what checkLine found in one line.
type lineCheck struct {
	// hash is the record's hash, which the next record must name as its
	// prev_hash ("" when the line is no record).
	hash string
	// keyID is the record's key_id: "" for a plain SHA-256 hash.
	keyID string
	// noKey is set when the record is keyed with a key keys lacks; its
	// hash was not checked.
	noKey bool
	// problem is what is wrong, "" when nothing.
	problem string
}

// checkLine checks one line of a chain: that it is a record, that its
// hash matches its content (SHA-256, or HMAC-SHA256 under the key of its
// key_id among keys) and that its prev_hash names the record before it,
// the line prevLine with the hash prev (nil and "": not known).
//
// Records written before prev_hash named the previous record's hash member
// named the SHA-256 of the previous line instead; that is accepted too,
// so that files written across the change verify. Either binds the record
// to the content of the one before it.
func checkLine(line []byte, prev string, prevLine []byte, keys map[string]*hasher) lineCheck {
	n := len(line)
	if n < hashSuffixLen+2 || !bytes.Equal(line[n-hashSuffixLen:n-hashSuffixLen+len(hashMember)], []byte(hashMember)) ||
		line[n-2] != '"' || line[n-1] != '}' {
		if !json.Valid(line) {
			return lineCheck{problem: "not a complete JSON record (torn write, or edited)"}
		}
		return lineCheck{problem: "has no hash member at its end"}
	}
	var r struct {
		KeyID    string  `json:"key_id"`
		PrevHash *string `json:"prev_hash"`
		Hash     string  `json:"hash"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return lineCheck{problem: fmt.Sprintf("not valid JSON (%v)", err)}
	}
	c := lineCheck{hash: r.Hash, keyID: r.KeyID}
	var h *hasher
	if r.KeyID != "" {
		if h = keys[r.KeyID]; h == nil {
			c.noKey = true
			return c
		}
	}
	body := make([]byte, 0, n-hashSuffixLen+1)
	body = append(append(body, line[:n-hashSuffixLen]...), '}')
	var sum [64]byte
	h.sum(body, &sum)
	if string(sum[:]) != r.Hash {
		c.hash = ""
		if h != nil {
			c.problem = "its content does not match its HMAC (the record was edited, and its hash recomputed without the key or not at all)"
		} else {
			c.problem = "its content does not match its hash (the record was edited)"
		}
		return c
	}
	switch {
	case r.PrevHash == nil:
		c.problem = "has no prev_hash"
	case prev != "" && *r.PrevHash != prev && !namesLine(*r.PrevHash, prevLine):
		c.problem = fmt.Sprintf("its prev_hash %.12s… is not the hash of the record before it, %.12s… (a record was removed, inserted or reordered before it)", *r.PrevHash, prev)
	}
	return c
}

// namesLine reports whether h is the hex SHA-256 of line (the prev_hash of
// records written before prev_hash named the previous record's hash).
func namesLine(h string, line []byte) bool {
	if line == nil || len(h) != 64 {
		return false
	}
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:]) == h
}
