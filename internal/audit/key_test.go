package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// keyedFile writes n records to a keyed audit file and returns its path,
// lines and key.
func keyedFile(t *testing.T, n int) (string, [][]byte, []byte) {
	t.Helper()
	dir := t.TempDir()
	key := []byte(strings.Repeat("0123456789abcdef", 2) + "-audit")
	keyFile := filepath.Join(dir, "audit-hmac.key")
	if err := os.WriteFile(keyFile, append(key, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	cfg.HMACKeyFile = keyFile
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, n)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg.Path, bytes.Split(bytes.TrimSuffix(mustRead(t, cfg.Path), []byte("\n")), []byte("\n")), key
}

// rehash rewrites lines[from:] as someone without the key would: each
// record decoded, edited by edit, and chained again with plain SHA-256
// hashes, keyed says whether its key_id is kept.
func rehash(t *testing.T, lines [][]byte, from int, keepKeyID bool, edit func(i int, r *Record)) [][]byte {
	t.Helper()
	out := append([][]byte(nil), lines...)
	prev := GenesisHash
	if from > 0 {
		prev = hashOf(lines[from-1])
	}
	for i := from; i < len(lines); i++ {
		var r Record
		if err := json.Unmarshal(lines[i], &r); err != nil {
			t.Fatal(err)
		}
		edit(i, &r)
		id := ""
		if keepKeyID {
			id = r.KeyID
		}
		body, err := encode(nil, &r, id)
		if err != nil {
			t.Fatal(err)
		}
		var p [64]byte
		copy(p[:], prev)
		line, _ := chain(body, &p, nil)
		out[i] = line[:len(line)-1]
		prev = hashOf(out[i])
	}
	return out
}

func TestKeyedChain(t *testing.T) {
	path, lines, key := keyedFile(t, 5)
	if !bytes.Contains(lines[0], []byte(`"key_id":"`+KeyID(key)+`","prev_hash":"`)) {
		t.Fatalf("a keyed record names its key id before prev_hash: %s", lines[0])
	}
	sum, err := VerifyOptions{Keys: [][]byte{key}}.Verify(path)
	if err != nil || sum.Records != 5 || sum.Keyed != 5 || sum.Unkeyed != 0 {
		t.Fatalf("Verify with the key = %+v, %v; want 5 keyed records", sum, err)
	}

	_, err = Verify(path)
	var need *KeyRequiredError
	if !errors.As(err, &need) || need.Line != 1 || need.KeyID != KeyID(key) ||
		!strings.Contains(err.Error(), "give audit.hmac_key_file with -key-file") {
		t.Errorf("Verify without the key = %v; want a *KeyRequiredError at line 1 asking for the key", err)
	}

	other := []byte(strings.Repeat("x", 32))
	_, err = VerifyOptions{Keys: [][]byte{other}}.Verify(path)
	var broken *BrokenError
	if !errors.As(err, &broken) || broken.Line != 1 || !strings.Contains(broken.Problem, "none of the keys given") {
		t.Errorf("Verify with another key = %v; want line 1: keyed with a key not given", err)
	}
	if _, err := (VerifyOptions{Keys: [][]byte{other, key}}).Verify(path); err != nil {
		t.Errorf("Verify with the old and the new key = %v; want the record's own key used", err)
	}
}

// TestKeyedChainEditedAndRehashedWithoutTheKey: whoever edits a record
// and recomputes the chain without the key is caught, however they
// recompute it — while the same edit passes an unkeyed chain.
func TestKeyedChainEditedAndRehashedWithoutTheKey(t *testing.T) {
	const n = 6
	edit := func(i int, r *Record) {
		if i == 2 {
			r.Tenant = "someone-else"
		}
	}
	tests := []struct {
		name     string
		tamper   func(t *testing.T, lines [][]byte) [][]byte
		line     int
		contains string
	}{
		{"key_id kept, SHA-256 recomputed", func(t *testing.T, ls [][]byte) [][]byte { return rehash(t, ls, 2, true, edit) },
			3, "does not match its HMAC"},
		{"key_id dropped from the edited record on", func(t *testing.T, ls [][]byte) [][]byte {
			return rehash(t, ls, 2, false, edit)
		}, 3, "plain SHA-256 hash after keyed records"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, lines, key := keyedFile(t, n)
			rewrite(t, path, tc.tamper(t, lines))
			_, err := VerifyOptions{Keys: [][]byte{key}}.Verify(path)
			var broken *BrokenError
			if !errors.As(err, &broken) || broken.Line != tc.line || !strings.Contains(broken.Problem, tc.contains) {
				t.Errorf("Verify = %v; want line %d: %s", err, tc.line, tc.contains)
			}
		})
	}
	t.Run("the whole file rewritten without keys", func(t *testing.T) {
		path, lines, key := keyedFile(t, n)
		rewrite(t, path, rehash(t, lines, 0, false, edit))
		if _, err := Verify(path); err != nil {
			t.Fatalf("the rewritten chain is a valid plain chain: %v", err)
		}
		if _, err := (VerifyOptions{Keys: [][]byte{key}}).Verify(path); err == nil || !strings.Contains(err.Error(), "no record is keyed") {
			t.Errorf("Verify with the key = %v; want: no record is keyed", err)
		}
	})
	t.Run("an unkeyed chain cannot tell", func(t *testing.T) {
		path, lines := goodFile(t, n)
		rewrite(t, path, rehash(t, lines, 2, false, edit))
		if _, err := Verify(path); err != nil {
			t.Errorf("Verify = %v; a plain chain recomputed after an edit verifies (which is why the key exists)", err)
		}
	})
}

// TestKeyTurnedOnLater: records written before audit.hmac_key_file was set
// verify with the key, as plain records before the first keyed one.
func TestKeyTurnedOnLater(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 3)
	w.Close()
	key := []byte(strings.Repeat("k", 40))
	cfg.HMACKeyFile = filepath.Join(dir, "k")
	if err := os.WriteFile(cfg.HMACKeyFile, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if w, err = Open(cfg, Options{}); err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 3, 5)
	w.Close()
	sum, err := VerifyOptions{Keys: [][]byte{key}}.Verify(cfg.Path)
	if err != nil || sum.Unkeyed != 3 || sum.Keyed != 2 {
		t.Errorf("Verify = %+v, %v; want 3 plain records, then 2 keyed", sum, err)
	}
}

func TestOpenRefusesShortKey(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	cfg.HMACKeyFile = filepath.Join(dir, "k")
	if err := os.WriteFile(cfg.HMACKeyFile, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(cfg, Options{}); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("Open = %v; want the key refused as too short", err)
	}
}
