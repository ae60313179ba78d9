package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestChainLinksRecordHashes checks the format: every record's hash is the
// SHA-256 of its line without the hash member, and its prev_hash is the
// hash of the record before it (GenesisHash for the first).
func TestChainLinksRecordHashes(t *testing.T) {
	_, lines := goodFile(t, 4)
	prev := GenesisHash
	for i, l := range lines {
		var r Record
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatal(err)
		}
		body := append(bytes.TrimSuffix(l, []byte(`,"hash":"`+r.Hash+`"}`)), '}')
		sum := sha256.Sum256(body)
		if got := hex.EncodeToString(sum[:]); got != r.Hash {
			t.Errorf("line %d: hash %s, SHA-256 of the body %s", i+1, r.Hash, got)
		}
		if r.PrevHash != prev {
			t.Errorf("line %d: prev_hash %s, want the previous record's hash %s", i+1, r.PrevHash, prev)
		}
		if !bytes.HasSuffix(body, []byte(`,"prev_hash":"`+r.PrevHash+`"}`)) {
			t.Errorf("line %d: prev_hash is not the last member of the body: %s", i+1, body)
		}
		prev = r.Hash
	}
}

func TestVerifyDetectsInsertedRecords(t *testing.T) {
	tests := []struct {
		name   string
		insert func(lines [][]byte) []byte
	}{
		{"a copy of a record", func(ls [][]byte) []byte { return ls[1] }},
		{"a record chained to the one before it", func(ls [][]byte) []byte {
			r := record(9)
			line, err := seal(r, hashOf(ls[1]))
			if err != nil {
				t.Fatal(err)
			}
			return line
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, lines := goodFile(t, 4)
			ins := tc.insert(lines)
			rewrite(t, path, [][]byte{lines[0], lines[1], ins, lines[2], lines[3]})
			_, err := Verify(path)
			var broken *BrokenError
			if !errors.As(err, &broken) || broken.Line > 4 || !strings.Contains(broken.Problem, "inserted") {
				t.Errorf("Verify = %v; want a break at line 3 or 4 naming an insertion", err)
			}
		})
	}
}

// seal returns the line of r chained to prev (64 hex digits), without its
// newline.
func seal(r *Record, prev string) ([]byte, error) {
	body, err := encode(nil, r, "")
	if err != nil {
		return nil, err
	}
	var p [64]byte
	copy(p[:], prev)
	line, _ := chain(body, &p, nil)
	return line[:len(line)-1], nil
}

// legacySeal is how records were chained before prev_hash named the
// previous record's hash: it named the SHA-256 of the previous line.
func legacySeal(t *testing.T, r *Record, prevLine []byte) []byte {
	t.Helper()
	prev := GenesisHash
	if prevLine != nil {
		sum := sha256.Sum256(prevLine)
		prev = hex.EncodeToString(sum[:])
	}
	line, err := seal(r, prev)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func TestVerifyAcceptsFilesWrittenBeforeTheFormatChange(t *testing.T) {
	cfg := fileConfig(t.TempDir(), "1MiB", config.AuditFsyncAlways, 3)
	var old [][]byte
	var prevLine []byte
	for i := range 3 {
		prevLine = legacySeal(t, record(i), prevLine)
		old = append(old, prevLine)
	}
	rewrite(t, cfg.Path, old)
	w, err := Open(cfg, Options{}) // continues after the old records
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 3, 5)
	w.Close()
	if sum, err := Verify(cfg.Path); err != nil || sum.Records != 5 || !sum.Anchored {
		t.Fatalf("Verify(old records, then new) = %+v, %v", sum, err)
	}
	lines := bytes.Split(bytes.TrimSuffix(mustRead(t, cfg.Path), []byte("\n")), []byte("\n"))
	rewrite(t, cfg.Path, append(lines[:1:1], lines[2:]...)) // remove an old record
	var broken *BrokenError
	if _, err := Verify(cfg.Path); !errors.As(err, &broken) || broken.Line != 2 || !strings.Contains(broken.Problem, "removed") {
		t.Errorf("Verify(old record removed) = %v; want line 2", err)
	}
}

func TestOpenContinuesFromTheLastHash(t *testing.T) {
	tests := []struct {
		name string
		last func(lines [][]byte) []byte
		want func(last []byte) string
	}{
		{"a record", func(ls [][]byte) []byte { return ls[len(ls)-1] }, hashOf},
		{"a line that is no record", func([][]byte) []byte { return []byte(`{"torn":`) }, func(l []byte) string {
			sum := sha256.Sum256(l)
			return hex.EncodeToString(sum[:])
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, lines := goodFile(t, 2)
			last := tc.last(lines)
			rewrite(t, path, append(lines[:1:1], last))
			r, prev, _, err := openRotating(path, 1<<20, 3)
			if err != nil {
				t.Fatal(err)
			}
			r.close()
			if want := tc.want(last); prev != want || len(prev) != 64 {
				t.Errorf("prev = %q, want %q", prev, want)
			}
		})
	}
	if got := nextPrev(nil); got != GenesisHash {
		t.Errorf("nextPrev(nil) = %q", got)
	}
}

func TestHashOf(t *testing.T) {
	h := strings.Repeat("0a", 32)
	for line, want := range map[string]string{
		`{"a":1,"hash":"` + h + `"}`:                         h,
		`{"a":1,"hash":"` + strings.ToUpper(h) + `"}`:        "",
		`{"a":1,"hash":"` + h[:63] + `"}`:                    "",
		`{"a":1,"hash":"` + h + `"} `:                        "",
		`{"a":1,"hash":"` + h + `"`:                          "",
		`{"hash":"` + h + `"}`:                               "",
		`{"a":1,"hash":"` + h[:62] + `zz"}`:                  "",
		`{"a":1,"prev_hash":"` + GenesisHash + `","x":"` + h: "",
	} {
		if got := hashOf([]byte(line)); got != want {
			t.Errorf("hashOf(%s) = %q, want %q", line, got, want)
		}
	}
}

func TestWriteRefusesWhatCannotBeEncoded(t *testing.T) {
	cfg := fileConfig(t.TempDir(), "1MiB", config.AuditFsyncAlways, 3)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 1)
	r := record(1)
	r.Time = r.Time.AddDate(10000, 0, 0)
	if err := w.Write(r); err == nil || !strings.Contains(err.Error(), "year") {
		t.Errorf("Write(year 12026) = %v", err)
	}
	writeN(t, w, 2, 3)
	w.Close()
	if sum, err := Verify(cfg.Path); err != nil || sum.Records != 2 {
		t.Errorf("Verify = %+v, %v; a refused record leaves the chain intact", sum, err)
	}
	if data := mustRead(t, cfg.Path); bytes.Contains(data, []byte("req-1")) {
		t.Errorf("the refused record was written: %s", data)
	}
}
