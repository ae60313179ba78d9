package audit

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// A keyed chain (audit.hmac_key_file) hashes each record with HMAC-SHA256
// under the key instead of SHA-256: whoever can edit the file but does not
// hold the key cannot recompute the hashes of what they changed. A keyed
// record names its key by key_id, a fingerprint that tells keys apart and
// reveals nothing of a 256-bit key, so that a verifier can say "keyed,
// give the key" or "keyed with another key" instead of "edited".

// keyIDLen is the length of a key id in hex digits.
const keyIDLen = 16

// KeyID returns the key id records keyed with key carry: the first 8 bytes
// of SHA-256("osb-gateway audit key id\n" + key), in hex.
func KeyID(key []byte) string {
	h := sha256.New()
	h.Write([]byte("osb-gateway audit key id\n"))
	h.Write(key)
	return hex.EncodeToString(h.Sum(nil)[:keyIDLen/2])
}

// LoadKey reads an audit HMAC key file as audit.hmac_key_file is read
// (config.ReadAuditKey: less a trailing newline, at least 32 bytes).
func LoadKey(path string) ([]byte, error) { return config.ReadAuditKey(path) }

// hasher hashes record bodies: SHA-256, or HMAC-SHA256 under a key. A
// keyed hasher is not safe for concurrent use (the Writer calls it under
// its lock; Verify has its own).
type hasher struct {
	mac hash.Hash // nil: plain SHA-256
	id  string    // key id; "" for plain SHA-256
	out []byte    // scratch for mac.Sum, so a record costs no allocation
}

// newHasher returns a hasher keyed with key, or a plain one for nil.
func newHasher(key []byte) *hasher {
	if key == nil {
		return &hasher{}
	}
	return &hasher{mac: hmac.New(sha256.New, key), id: KeyID(key), out: make([]byte, 0, sha256.Size)}
}

// sum writes the hash of body to out (hex).
func (h *hasher) sum(body []byte, out *[64]byte) {
	if h == nil || h.mac == nil {
		s := sha256.Sum256(body)
		hex.Encode(out[:], s[:])
		return
	}
	h.mac.Reset()
	h.mac.Write(body)
	h.out = h.mac.Sum(h.out[:0])
	hex.Encode(out[:], h.out)
}
