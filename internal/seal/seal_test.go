package seal

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// testKey is a key made of one repeated byte: distinct per b, readable in
// failures.
func testKey(b byte) []byte { return bytes.Repeat([]byte{b}, KeySize) }

func mustNew(t *testing.T, keys ...[]byte) *Keyring {
	t.Helper()
	k, err := New(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

var aadOf = []byte("parameters\x00broker-1\x00instance-1")

func TestRoundTrip(t *testing.T) {
	k := mustNew(t, testKey(1))
	for _, plain := range [][]byte{nil, []byte("{}"), []byte(`{"password":"hunter2"}`), bytes.Repeat([]byte("x"), 1<<16)} {
		sealed, err := k.Seal(plain, aadOf)
		if err != nil {
			t.Fatal(err)
		}
		if len(sealed) != len(plain)+Overhead {
			t.Errorf("sealed %d bytes into %d, want %d", len(plain), len(sealed), len(plain)+Overhead)
		}
		got, err := k.Open(sealed, aadOf)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		if !bytes.Equal(got, plain) {
			t.Errorf("Open = %q, want %q", got, plain)
		}
		if !k.Current(sealed) {
			t.Error("Current of a blob just sealed = false")
		}
	}
}

// TestSealIsRandomized seals the same secret twice: the blobs differ (a
// fresh nonce each time), so equal secrets cannot be told apart by their
// blobs.
func TestSealIsRandomized(t *testing.T) {
	k := mustNew(t, testKey(1))
	a, _ := k.Seal([]byte("same"), nil)
	b, _ := k.Seal([]byte("same"), nil)
	if bytes.Equal(a, b) {
		t.Error("two Seals of the same secret gave the same blob")
	}
}

func TestRotation(t *testing.T) {
	old := mustNew(t, testKey(1))
	sealedOld, err := old.Seal([]byte("old secret"), aadOf)
	if err != nil {
		t.Fatal(err)
	}
	rotated := mustNew(t, testKey(2), testKey(1)) // new key first, old kept
	got, err := rotated.Open(sealedOld, aadOf)
	if err != nil || string(got) != "old secret" {
		t.Fatalf("Open of an old blob after rotation = %q, %v", got, err)
	}
	if rotated.Current(sealedOld) {
		t.Error("Current of a blob sealed with the old key = true, want false")
	}
	sealedNew, err := rotated.Seal([]byte("new secret"), aadOf)
	if err != nil {
		t.Fatal(err)
	}
	if !rotated.Current(sealedNew) {
		t.Error("Current of a blob sealed after rotation = false")
	}
	if !bytes.Equal(sealedNew[1:1+idSize], rotated.keys[0].id[:]) {
		t.Error("a blob sealed after rotation does not name the new key")
	}
	// The old key alone cannot open what the new one sealed.
	_, err = old.Open(sealedNew, aadOf)
	if !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Open with the old key only: %v, want ErrUnknownKey", err)
	}
	// Once the old key is dropped, its blobs cannot be opened.
	_, err = mustNew(t, testKey(2)).Open(sealedOld, aadOf)
	if !errors.Is(err, ErrUnknownKey) {
		t.Errorf("Open after dropping the old key: %v, want ErrUnknownKey", err)
	}
}

func TestTamper(t *testing.T) {
	k := mustNew(t, testKey(1))
	sealed, err := k.Seal([]byte(`{"password":"hunter2"}`), aadOf)
	if err != nil {
		t.Fatal(err)
	}
	// Every single bit flipped anywhere is caught.
	for i := range sealed {
		for bit := range 8 {
			bad := bytes.Clone(sealed)
			bad[i] ^= 1 << bit
			if _, err := k.Open(bad, aadOf); err == nil {
				t.Fatalf("Open accepted the blob with bit %d of byte %d flipped", bit, i)
			}
		}
	}
	tests := []struct {
		name   string
		sealed []byte
		aad    []byte
		want   error
	}{
		{"other additional data", sealed, []byte("parameters\x00broker-1\x00instance-2"), ErrOpen},
		{"no additional data", sealed, nil, ErrOpen},
		{"ciphertext flipped", flip(sealed, len(sealed)-tagSize-1), aadOf, ErrOpen},
		{"tag flipped", flip(sealed, len(sealed)-1), aadOf, ErrOpen},
		{"nonce flipped", flip(sealed, 1+idSize), aadOf, ErrOpen},
		{"truncated", sealed[:len(sealed)-1], aadOf, ErrOpen},
		{"too short", sealed[:Overhead-1], aadOf, ErrMalformed},
		{"empty", nil, aadOf, ErrMalformed},
		{"other version", flipTo(sealed, 0, 2), aadOf, ErrMalformed},
		{"key id changed", flip(sealed, 1), aadOf, ErrUnknownKey},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := k.Open(tc.sealed, tc.aad)
			if !errors.Is(err, tc.want) || got != nil {
				t.Errorf("Open = %q, %v; want nil, %v", got, err, tc.want)
			}
		})
	}
}

func flip(b []byte, i int) []byte { return flipTo(b, i, b[i]^0x01) }

func flipTo(b []byte, i int, v byte) []byte {
	out := bytes.Clone(b)
	out[i] = v
	return out
}

// TestWrongKey opens with a key file that lacks the sealing key: the error
// names key ids, never key material or the secret.
func TestWrongKey(t *testing.T) {
	secret := "marker-3f1c-do-not-log"
	sealed, err := mustNew(t, testKey(1)).Seal([]byte(secret), aadOf)
	if err != nil {
		t.Fatal(err)
	}
	wrong := mustNew(t, testKey(9), testKey(8))
	got, err := wrong.Open(sealed, aadOf)
	if !errors.Is(err, ErrUnknownKey) || got != nil {
		t.Fatalf("Open with the wrong keys = %q, %v; want ErrUnknownKey", got, err)
	}
	for _, leak := range []string{secret, string(testKey(1)), string(testKey(9)),
		base64.StdEncoding.EncodeToString(testKey(9))} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q contains secret material", err)
		}
	}
	for _, id := range wrong.KeyIDs() {
		if !strings.Contains(err.Error(), id) {
			t.Errorf("error %q does not name loaded key id %s", err, id)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	tests := []struct {
		name string
		keys [][]byte
	}{
		{"no key", nil},
		{"short key", [][]byte{testKey(1)[:16]}},
		{"long key", [][]byte{append(testKey(1), 0)}},
		{"same key twice", [][]byte{testKey(1), testKey(2), testKey(1)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.keys...); !errors.Is(err, ErrKey) {
				t.Errorf("New: %v, want ErrKey", err)
			}
		})
	}
}

func TestParse(t *testing.T) {
	b64 := func(b byte) string { return base64.StdEncoding.EncodeToString(testKey(b)) }
	raw := func(b byte) string { return base64.RawStdEncoding.EncodeToString(testKey(b)) }
	file := "# rotated 2031-05-06: new key first\n" + b64(2) + "\n\n  " + raw(1) + "  \r\n# old keys above\n"
	k, err := Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := mustNew(t, testKey(2), testKey(1)).KeyIDs()
	if d := cmp.Diff(want, k.KeyIDs()); d != "" {
		t.Errorf("KeyIDs (-want +got):\n%s", d)
	}

	bad := []struct {
		name, file, want string
	}{
		{"empty", "", "no key"},
		{"comments only", "# nothing\n\n", "no key"},
		{"not base64", b64(1) + "\nnot-base64!\n", "line 2 is not base64"},
		{"16 bytes", base64.StdEncoding.EncodeToString(testKey(1)[:16]), "line 1 holds 16 bytes, want 32"},
		{"duplicate", b64(1) + "\n" + raw(1), "key 2 repeats an earlier key"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file))
			if !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Parse: %v, want ErrKey saying %q", err, tc.want)
			}
			if err != nil && strings.Contains(err.Error(), b64(1)[:20]) {
				t.Errorf("error %q contains key material", err)
			}
		})
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "inventory.keys")
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(testKey(3))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(mustNew(t, testKey(3)).KeyIDs(), k.KeyIDs()); d != "" {
		t.Errorf("KeyIDs (-want +got):\n%s", d)
	}
	if _, err := LoadFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("LoadFile of a missing file succeeded")
	}
	if err := os.WriteFile(path, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadFile(path); !errors.Is(err, ErrKey) || !strings.Contains(err.Error(), path) {
		t.Errorf("LoadFile of a bad file: %v, want ErrKey naming the file", err)
	}
}

func FuzzOpen(f *testing.F) {
	k, _ := New(testKey(1))
	good, _ := k.Seal([]byte("secret"), aadOf)
	f.Add(good, aadOf)
	f.Add([]byte{1, 2, 3}, []byte(nil))
	f.Fuzz(func(t *testing.T, sealed, aad []byte) {
		plain, err := k.Open(sealed, aad)
		if err == nil && (!bytes.Equal(sealed, good) || !bytes.Equal(aad, aadOf) || string(plain) != "secret") {
			t.Fatalf("Open accepted a forged blob: %x -> %q", sealed, plain)
		}
	})
}
