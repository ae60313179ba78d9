package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// goodFile writes n records to a fresh file and returns its path and
// lines.
func goodFile(t *testing.T, n int) (string, [][]byte) {
	t.Helper()
	cfg := fileConfig(t.TempDir(), "1MiB", config.AuditFsyncNever, 3)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, n)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return cfg.Path, bytes.Split(bytes.TrimSuffix(mustRead(t, cfg.Path), []byte("\n")), []byte("\n"))
}

// rewrite replaces the file's lines.
func rewrite(t *testing.T, path string, lines [][]byte) {
	t.Helper()
	if err := os.WriteFile(path, append(bytes.Join(lines, []byte("\n")), '\n'), 0o640); err != nil {
		t.Fatal(err)
	}
}

func TestVerifyNamesFirstBrokenRecord(t *testing.T) {
	tests := []struct {
		name     string
		tamper   func(lines [][]byte) [][]byte
		line     int
		contains string
	}{
		{"one byte of a status edited", func(ls [][]byte) [][]byte {
			ls[2] = bytes.Replace(ls[2], []byte(`"status":201`), []byte(`"status":200`), 1)
			return ls
		}, 3, "edited"},
		{"instance id edited", func(ls [][]byte) [][]byte {
			ls[1] = bytes.Replace(ls[1], []byte("inst-1"), []byte("inst-X"), 1)
			return ls
		}, 2, "edited"},
		{"record removed", func(ls [][]byte) [][]byte { return append(ls[:2], ls[3:]...) }, 3, "removed"},
		{"records swapped", func(ls [][]byte) [][]byte { ls[1], ls[2] = ls[2], ls[1]; return ls }, 2, "prev_hash"},
		{"hash recomputed after an edit", func(ls [][]byte) [][]byte {
			var r Record
			_ = json.Unmarshal(ls[1], &r)
			r.Status = 500
			ls[1], _ = seal(&r, r.PrevHash) // consistent in itself, but the next record names the old one
			return ls
		}, 3, "prev_hash"},
		{"line that is no record", func(ls [][]byte) [][]byte { ls[3] = []byte("hello"); return ls }, 4, "JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path, lines := goodFile(t, 5)
			if _, err := Verify(path); err != nil {
				t.Fatalf("Verify before tampering: %v", err)
			}
			rewrite(t, path, tc.tamper(lines))
			_, err := Verify(path)
			var broken *BrokenError
			if !errors.As(err, &broken) {
				t.Fatalf("Verify = %v, want a *BrokenError", err)
			}
			if broken.File != path || broken.Line != tc.line || !strings.Contains(broken.Problem, tc.contains) {
				t.Errorf("broken at %s; want line %d, a problem naming %q", broken, tc.line, tc.contains)
			}
		})
	}
}

func TestVerifyUnreadableFile(t *testing.T) {
	if _, err := Verify("/nonexistent/audit.log"); err == nil || errors.As(err, new(*BrokenError)) {
		t.Errorf("Verify(missing file) = %v; want the open error", err)
	}
}

func TestQueryFilters(t *testing.T) {
	path, _ := goodFile(t, 6)
	// Give records 4 and 5 another tenant and status through a second run.
	w, _ := Open(fileConfig(filepath.Dir(path), "1MiB", config.AuditFsyncAlways, 3), Options{})
	r := record(6)
	r.Tenant, r.Status, r.InstanceID = "dev", 404, "inst-1"
	_ = w.Write(r)
	w.Close()
	tests := []struct {
		name string
		f    Filter
		want []string // request ids
	}{
		{"everything", Filter{}, []string{"req-0", "req-1", "req-2", "req-3", "req-4", "req-5", "req-6"}},
		{"instance", Filter{InstanceID: "inst-1"}, []string{"req-1", "req-6"}},
		{"tenant", Filter{Tenant: "dev"}, []string{"req-6"}},
		{"broker", Filter{Broker: "pg"}, nil},
		{"status class", Filter{Status: "4xx"}, []string{"req-6"}},
		{"exact status", Filter{Status: "201"}, []string{"req-0", "req-1", "req-2", "req-3", "req-4", "req-5"}},
		{"since and until", Filter{Since: record(2).Time, Until: record(4).Time}, []string{"req-2", "req-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			n, err := Query(&out, tc.f, path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
				var r Record
				if l != "" && json.Unmarshal([]byte(l), &r) == nil {
					got = append(got, r.RequestID)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" || n != len(tc.want) {
				t.Errorf("Query (%d matched) (-want +got):\n%s", n, diff)
			}
		})
	}
	if err := ParseStatus("6xx"); err == nil {
		t.Error("ParseStatus(6xx) accepted")
	}
}
