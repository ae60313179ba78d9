package seal

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
)

// The key file holds one key per line, the standard base64 encoding (with
// or without padding) of KeySize random bytes. The first key seals; every
// key opens. Blank lines and lines starting with "#" are ignored, and
// spaces around a key are trimmed. Make a key with
//
//	head -c 32 /dev/urandom | base64
//
// To rotate: put a new key on the first line and keep the old ones below
// it until everything sealed with them has been sealed again (Current tells
// which blobs are), then remove them. Errors name the file and the line,
// never a key.

// LoadFile reads a key file (format above) and returns its Keyring.
func LoadFile(path string) (*Keyring, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("seal: read key file: %w", err)
	}
	k, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// Parse reads the keys of a key file's contents (format above).
func Parse(data []byte) (*Keyring, error) {
	var keys [][]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		raw, err := decodeKey(line)
		if err != nil {
			return nil, fmt.Errorf("%w: line %d is not base64", ErrKey, i+1)
		}
		if len(raw) != KeySize {
			return nil, fmt.Errorf("%w: line %d holds %d bytes, want %d", ErrKey, i+1, len(raw), KeySize)
		}
		keys = append(keys, raw)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: no key (one base64 %d-byte key per line, the first seals)", ErrKey, KeySize)
	}
	k, err := New(keys...)
	for _, raw := range keys {
		clear(raw)
	}
	return k, err
}

// decodeKey decodes standard base64, padded or not.
func decodeKey(line []byte) ([]byte, error) {
	enc := base64.StdEncoding
	if line[len(line)-1] != '=' {
		enc = base64.RawStdEncoding
	}
	out := make([]byte, enc.DecodedLen(len(line)))
	n, err := enc.Decode(out, line)
	return out[:n], err
}
