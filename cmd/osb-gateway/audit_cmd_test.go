package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
)

// auditLog writes records for instances i-0 … i-(n-1), tenant cf with
// status 201 except every third (tenant dev, status 409), and returns the
// files oldest first (it rotates at 4 KiB).
func auditLog(t *testing.T, n int) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(config.Audit{Sink: config.AuditSinkFile, Path: path, MaxSize: "4KiB", MaxFiles: 10,
		Fsync: config.AuditFsyncNever, FsyncInterval: time.Hour}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		r := &audit.Record{Time: time.Date(2026, 3, 1, 12, i, 0, 0, time.UTC), RequestID: fmt.Sprintf("r-%d", i),
			Tenant: "cf", Broker: "mysql", Endpoint: "provision", Method: "PUT", InstanceID: fmt.Sprintf("i-%d", i),
			Status: 201, Outcome: "forwarded"}
		if i%3 == 2 {
			r.Tenant, r.Status = "dev", 409
		}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	rotated, _ := filepath.Glob(path + ".*")
	return append(rotated, path)
}

func runAuditArgs(args ...string) (code int, stdout, stderr string) {
	var out, errOut bytes.Buffer
	code = runAudit(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestAuditVerifyCommand(t *testing.T) {
	files := auditLog(t, 30)
	if len(files) < 2 {
		t.Fatalf("want a rotated log, got %q", files)
	}
	code, out, errOut := runAuditArgs(append([]string{"verify"}, files...)...)
	if code != 0 || !strings.HasPrefix(out, "ok: 30 records in ") || errOut != "" {
		t.Fatalf("verify good log: %d %q %q", code, out, errOut)
	}
	// Edit one byte of the 3rd record of the newest file.
	last := files[len(files)-1]
	data, _ := os.ReadFile(last)
	lines := strings.SplitAfter(string(data), "\n")
	lines[2] = strings.Replace(lines[2], `"status":201`, `"status":202`, 1)
	lines[2] = strings.Replace(lines[2], `"status":409`, `"status":408`, 1)
	if err := os.WriteFile(last, []byte(strings.Join(lines, "")), 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runAuditArgs(append([]string{"verify"}, files...)...)
	if want := "chain broken at " + last + ":3: "; code != 1 || out != "" || !strings.Contains(errOut, want) {
		t.Errorf("verify edited log: %d %q %q; want exit 1 naming %s", code, out, errOut, want)
	}
}

func TestAuditQueryCommand(t *testing.T) {
	files := auditLog(t, 9)
	tests := []struct {
		name string
		args []string
		want []string // request ids
	}{
		{"instance", []string{"-instance", "i-4"}, []string{"r-4"}},
		{"tenant and status class", []string{"-tenant", "dev", "-status", "4xx"}, []string{"r-2", "r-5", "r-8"}},
		{"exact status", []string{"-status", "409", "-broker", "mysql"}, []string{"r-2", "r-5", "r-8"}},
		{"time window", []string{"-since", "2026-03-01T12:03:00Z", "-until", "2026-03-01T12:05:00Z"}, []string{"r-3", "r-4"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"query"}, tc.args...)
			for _, f := range files {
				args = append(args, "-file", f)
			}
			code, out, errOut := runAuditArgs(args...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if i := strings.Index(l, `"request_id":"`); i >= 0 {
					got = append(got, strings.SplitN(l[i+len(`"request_id":"`):], `"`, 2)[0])
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("query %v = %v, want %v", tc.args, got, tc.want)
			}
		})
	}
}

func TestAuditCommandUsage(t *testing.T) {
	for _, args := range [][]string{{}, {"verify"}, {"query"}, {"query", "-status", "6xx", "x"}, {"query", "-since", "yesterday", "x"}, {"rewrite"}} {
		if code, _, errOut := runAuditArgs(args...); code != 2 || errOut == "" {
			t.Errorf("audit %q: exit %d, stderr %q; want 2 and a message", args, code, errOut)
		}
	}
	if code, _, errOut := runAuditArgs("verify", "/nonexistent/audit.log"); code != 1 || !strings.Contains(errOut, "no such file") {
		t.Errorf("verify missing file: %d %q", code, errOut)
	}
}

// TestAuditVerifyFindsACutShortFile is the case: "audit verify"
// said "ok: 21 records" for a 23-record file cut short.
func TestAuditVerifyFindsACutShortFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.log")
	w, err := audit.Open(config.Audit{Sink: config.AuditSinkFile, Path: path, MaxSize: "1MiB", MaxFiles: 10,
		Fsync: config.AuditFsyncAlways, FsyncInterval: time.Hour}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 23 {
		if err := w.Write(&audit.Record{RequestID: fmt.Sprintf("r-%d", i), Endpoint: "provision", Method: "PUT", Status: 201}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	code, out, _ := runAuditArgs("verify", path)
	if code != 0 || !strings.Contains(out, "head: audit.log held 23 records") {
		t.Fatalf("verify intact: %d %q", code, out)
	}
	data, _ := os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[:21], "")), 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAuditArgs("verify", path)
	if code != 1 || out != "" || !strings.Contains(errOut, "was cut short: 23 records at the head") || !strings.Contains(errOut, "21 in the file") {
		t.Errorf("verify cut short: %d %q %q; want exit 1: 23 records at the head, 21 in the file", code, out, errOut)
	}
	// The head as the log carries it, saved to a file, serves as well when
	// the head file is gone too.
	head, _ := os.ReadFile(audit.HeadPath(path))
	os.Remove(audit.HeadPath(path))
	logged := filepath.Join(t.TempDir(), "logged-head.json")
	if err := os.WriteFile(logged, head, 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out, _ := runAuditArgs("verify", path); code != 0 || !strings.Contains(out, "head: none") {
		t.Errorf("verify without a head: %d %q; want ok, saying nothing vouches for the end", code, out)
	}
	if code, _, errOut := runAuditArgs("verify", "-head", logged, path); code != 1 || !strings.Contains(errOut, "21 in the file") {
		t.Errorf("verify -head logged: %d %q", code, errOut)
	}
}

func TestAuditVerifyKeyedChain(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "audit-hmac.key")
	if err := os.WriteFile(keyFile, []byte(strings.Repeat("s3cr3t", 8)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "audit.log")
	w, err := audit.Open(config.Audit{Sink: config.AuditSinkFile, Path: path, MaxSize: "1MiB", MaxFiles: 10,
		Fsync: config.AuditFsyncAlways, FsyncInterval: time.Hour, HMACKeyFile: keyFile}, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if err := w.Write(&audit.Record{RequestID: fmt.Sprintf("r-%d", i), Endpoint: "bind", Method: "PUT", Status: 201}); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	code, _, errOut := runAuditArgs("verify", path)
	if code != 2 || !strings.Contains(errOut, "the chain is keyed (HMAC-SHA256, key id ") || !strings.Contains(errOut, "-key-file") {
		t.Errorf("verify keyed without the key: %d %q; want exit 2 asking for -key-file", code, errOut)
	}
	code, out, errOut := runAuditArgs("verify", "-key-file", keyFile, path)
	if code != 0 || !strings.Contains(out, "keyed: all 3 records with HMAC-SHA256") {
		t.Errorf("verify -key-file: %d %q %q", code, out, errOut)
	}
	short := filepath.Join(dir, "short.key")
	os.WriteFile(short, []byte("short"), 0o600)
	if code, _, errOut := runAuditArgs("verify", "-key-file", short, path); code != 2 || !strings.Contains(errOut, "at least 32") {
		t.Errorf("verify -key-file short: %d %q", code, errOut)
	}
}
