// Package seal encrypts the secrets the inventory may keep (service
// instance parameters, binding credentials) with AES-256-GCM from the
// standard library, under a list of keys: the first key seals, every key
// opens, so keys rotate by putting a new key first and keeping the old ones
// until nothing sealed with them is left.
//
// # Sealed format
//
// A sealed secret is one byte string:
//
//	version (1 byte, 1) | key id (4 bytes) | nonce (12 bytes) | AES-256-GCM ciphertext and tag (16 bytes)
//
// The key id is the first 4 bytes of SHA-256("osb-gateway seal key id\x00"
// || key): it names the key that opens the blob without revealing anything
// about it. The nonce is random (crypto/rand) for every Seal; NIST SP
// 800-38D allows 2^32 seals per key with random 96-bit nonces (a repeat
// then stays below a chance of 2^-32), far beyond an inventory's size, and
// rotation starts the count again. The version byte and
// key id are authenticated with the additional data the caller gives, so a
// blob cannot be moved to another key or another record unnoticed.
//
// # Additional data
//
// Seal and Open take additional data: bytes that are not stored in the
// blob but must be the same to open it. Callers bind a secret to where it
// belongs (for example "parameters", the broker and the instance id), so
// that someone able to write the store cannot swap one instance's sealed
// parameters onto another.
package seal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
)

// Errors of Open and of building a Keyring; match them with errors.Is.
var (
	// ErrUnknownKey means the blob names a key id the Keyring does not
	// hold: it was sealed with a key missing from the key file.
	ErrUnknownKey = errors.New("seal: sealed with a key that is not loaded")
	// ErrOpen means a blob could not be opened with the key it names: it
	// was changed, or the additional data differs from what sealed it.
	ErrOpen = errors.New("seal: message authentication failed")
	// ErrMalformed means the bytes are not a sealed blob of a known
	// version (too short, or another version byte).
	ErrMalformed = errors.New("seal: not a sealed blob")
	// ErrKey means a key is unusable: not 32 bytes, or a duplicate.
	ErrKey = errors.New("seal: bad key")
)

// KeySize is the length of an AES-256 key in bytes.
const KeySize = 32

const (
	version   = 1
	idSize    = 4
	nonceSize = 12
	tagSize   = 16
	header    = 1 + idSize + nonceSize
	// Overhead is how many bytes Seal adds to the plaintext.
	Overhead = header + tagSize
)

// keyIDLabel separates the key id's hash from any other use of the key.
const keyIDLabel = "osb-gateway seal key id\x00"

// key is one loaded key.
type key struct {
	id   [idSize]byte
	aead cipher.AEAD
}

// Keyring holds the keys: the first seals, all open. It is safe for
// concurrent use and never changes after New.
type Keyring struct {
	keys []key
	byID map[[idSize]byte]cipher.AEAD
}

// New returns a Keyring of keys, each KeySize bytes, the first sealing.
// It copies nothing it does not need: the raw keys may be cleared after.
// It fails with ErrKey for no key, a key of the wrong size, or the same
// key twice.
func New(keys ...[]byte) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key", ErrKey)
	}
	k := &Keyring{byID: make(map[[idSize]byte]cipher.AEAD, len(keys))}
	for i, raw := range keys {
		if len(raw) != KeySize {
			return nil, fmt.Errorf("%w: key %d is %d bytes, want %d", ErrKey, i+1, len(raw), KeySize)
		}
		block, err := aes.NewCipher(raw)
		if err != nil { // unreachable with 32 bytes
			return nil, fmt.Errorf("%w: key %d: %w", ErrKey, i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("%w: key %d: %w", ErrKey, i+1, err)
		}
		id := keyID(raw)
		if _, dup := k.byID[id]; dup {
			return nil, fmt.Errorf("%w: key %d repeats an earlier key (id %x)", ErrKey, i+1, id)
		}
		k.keys = append(k.keys, key{id: id, aead: aead})
		k.byID[id] = aead
	}
	return k, nil
}

// keyID is the id of raw: the first bytes of its labelled SHA-256.
func keyID(raw []byte) [idSize]byte {
	h := sha256.New()
	h.Write([]byte(keyIDLabel))
	h.Write(raw)
	var id [idSize]byte
	copy(id[:], h.Sum(nil))
	return id
}

// KeyIDs returns the ids of the keys in order, the sealing key first, in
// hex: safe to log, they say which keys are loaded and nothing about them.
func (k *Keyring) KeyIDs() []string {
	ids := make([]string, len(k.keys))
	for i, key := range k.keys {
		ids[i] = hex.EncodeToString(key.id[:])
	}
	return ids
}

// Seal encrypts plaintext with the first key, binding it to
// additionalData, and returns a new blob of len(plaintext)+Overhead bytes.
// It fails only if the system's random source does.
func (k *Keyring) Seal(plaintext, additionalData []byte) ([]byte, error) {
	primary := k.keys[0]
	out := make([]byte, header, len(plaintext)+Overhead)
	out[0] = version
	copy(out[1:], primary.id[:])
	if _, err := rand.Read(out[1+idSize : header]); err != nil {
		return nil, fmt.Errorf("seal: random nonce: %w", err)
	}
	return primary.aead.Seal(out, out[1+idSize:header], plaintext, aad(out[:1+idSize], additionalData)), nil
}

// Open decrypts a blob made by Seal with the same additionalData, with
// whichever loaded key sealed it. It returns ErrMalformed, ErrUnknownKey or
// ErrOpen (wrapped) when it cannot; the errors never contain the blob.
func (k *Keyring) Open(sealed, additionalData []byte) ([]byte, error) {
	if len(sealed) < Overhead {
		return nil, fmt.Errorf("%w: %d bytes, fewer than the %d of an empty secret", ErrMalformed, len(sealed), Overhead)
	}
	if sealed[0] != version {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, sealed[0], version)
	}
	id := [idSize]byte(sealed[1 : 1+idSize])
	aead, ok := k.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: key id %x (loaded: %v)", ErrUnknownKey, id, k.KeyIDs())
	}
	plain, err := aead.Open(nil, sealed[1+idSize:header], sealed[header:], aad(sealed[:1+idSize], additionalData))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed with key id %x", ErrOpen, id)
	}
	return plain, nil
}

// Current reports whether sealed was sealed with the first key, so that a
// caller rotating keys knows what to seal again. It does not open sealed.
func (k *Keyring) Current(sealed []byte) bool {
	return len(sealed) >= Overhead && sealed[0] == version && [idSize]byte(sealed[1:1+idSize]) == k.keys[0].id
}

// aad is the authenticated data of a blob: its version and key id, then
// the caller's additional data.
func aad(head, additionalData []byte) []byte {
	out := make([]byte, 0, len(head)+len(additionalData))
	return append(append(out, head...), additionalData...)
}
