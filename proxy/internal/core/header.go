package core

import (
	"encoding/binary"
	"math/rand/v2"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// HeaderValue is h.Get(key) for a key already in canonical form, without
// canonicalizing it again on every request.
func HeaderValue(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// Canonical header keys, precomputed so hot paths index maps directly.
var (
	HeaderRequestIdentity = http.CanonicalHeaderKey(osb.HeaderRequestIdentity)
	HeaderAPIVersion      = http.CanonicalHeaderKey(osb.HeaderAPIVersion)
)

// NewRequestID returns a random RFC 4122 version 4 UUID.
func NewRequestID() string {
	var u [16]byte
	binary.LittleEndian.PutUint64(u[:8], rand.Uint64())
	binary.LittleEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	var out [36]byte
	j := 0
	for i, c := range u {
		out[j], out[j+1] = hexDigits[c>>4], hexDigits[c&0x0f]
		j += 2
		if dashAfter>>i&1 == 1 {
			out[j] = '-'
			j++
		}
	}
	return string(out[:])
}

const (
	hexDigits = "0123456789abcdef"
	// dashAfter marks the bytes of a UUID followed by a dash (3, 5, 7, 9).
	dashAfter = 1<<3 | 1<<5 | 1<<7 | 1<<9
)

// HeaderOriginatingIdentity is X-Broker-API-Originating-Identity in its
// canonical form, the key of http.Header.
var HeaderOriginatingIdentity = http.CanonicalHeaderKey(osb.HeaderOriginatingIdentity)
