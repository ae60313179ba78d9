package audit

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// fileConfig is a file sink at dir/audit.log rotating at maxSize.
func fileConfig(dir, maxSize, fsync string, maxFiles int) config.Audit {
	return config.Audit{Sink: config.AuditSinkFile, Path: filepath.Join(dir, "audit.log"), MaxSize: maxSize,
		MaxFiles: maxFiles, Fsync: fsync, FsyncInterval: time.Hour, Parameters: config.AuditParametersKeys}
}

// record is a record for instance n.
func record(n int) *Record {
	return &Record{Time: time.Date(2026, 1, 2, 3, 4, n, 0, time.UTC), RequestID: fmt.Sprintf("req-%d", n),
		Tenant: "cf", Broker: "mysql", Endpoint: "provision", Method: "PUT", InstanceID: fmt.Sprintf("inst-%d", n),
		Status: 201, Outcome: "forwarded"}
}

func writeN(t *testing.T, w *Writer, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := w.Write(record(i)); err != nil {
			t.Fatalf("Write(%d): %v", i, err)
		}
	}
}

// chainFiles returns the rotated files oldest first, then the current one.
func chainFiles(t *testing.T, path string) []string {
	t.Helper()
	rotated, err := filepath.Glob(path + ".[0-9]*") // not the head file

	if err != nil {
		t.Fatal(err)
	}
	return append(rotated, path)
}

func TestRotationKeepsTheChain(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "4KiB", config.AuditFsyncInterval, 100)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 60) // ~330 bytes each: several files
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := chainFiles(t, cfg.Path)
	if len(files) < 4 {
		t.Fatalf("files %q: want at least 3 rotations", files)
	}
	for _, f := range files {
		if st, err := os.Stat(f); err != nil || st.Size() > 4<<10 {
			t.Errorf("%s: %v bytes (limit 4096), %v", f, st.Size(), err)
		}
	}
	sum, err := Verify(files...)
	if err != nil || sum.Records != 60 || !sum.Anchored || sum.Files != len(files) {
		t.Errorf("Verify = %+v, %v; want 60 anchored records", sum, err)
	}
}

func TestRotationDeletesOldestFiles(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "4KiB", config.AuditFsyncNever, 2)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 80)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := chainFiles(t, cfg.Path)
	if len(files) != 3 {
		t.Fatalf("files %q: want 2 rotated and the current", files)
	}
	sum, err := Verify(files...)
	if err != nil || sum.Anchored {
		t.Errorf("Verify = %+v, %v; want an intact chain that starts after deleted records", sum, err)
	}
}

func TestRestartContinuesTheChain(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	for run := range 3 {
		w, err := Open(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		writeN(t, w, run*5, run*5+5)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if sum, err := Verify(cfg.Path); err != nil || sum.Records != 15 {
		t.Errorf("Verify after 3 runs = %+v, %v; want 15 records in one chain", sum, err)
	}
}

func TestRestartAfterRotationContinuesFromRotatedFile(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "4KiB", config.AuditFsyncAlways, 5)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 20)
	w.Close()
	// A crash right after a rotation leaves an empty current file.
	if err := os.Rename(cfg.Path, cfg.Path+".000099"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg.Path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	w, err = Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 20, 22)
	w.Close()
	if _, err := Verify(chainFiles(t, cfg.Path)...); err != nil {
		t.Errorf("Verify: %v", err)
	}
}

func TestTornLastLineIsReportedNotContinued(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	w, _ := Open(cfg, Options{})
	writeN(t, w, 0, 3)
	w.Close()
	data, _ := os.ReadFile(cfg.Path)
	if err := os.WriteFile(cfg.Path, data[:len(data)-40], 0o640); err != nil { // cut the last record short
		t.Fatal(err)
	}
	// A crash tears only what was not synced, which no head names yet
	// (head_test.go: a synced record cut short is refused).
	if err := os.Remove(HeadPath(cfg.Path)); err != nil {
		t.Fatal(err)
	}
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 3, 4)
	w.Close()
	_, err = Verify(cfg.Path)
	var broken *BrokenError
	if !errors.As(err, &broken) || broken.Line != 3 || !strings.Contains(broken.Problem, "torn") {
		t.Fatalf("Verify = %v; want line 3 reported torn", err)
	}
	lines := strings.Split(strings.TrimSpace(string(mustRead(t, cfg.Path))), "\n")
	if len(lines) != 4 {
		t.Errorf("%d lines; the record after a torn line starts a line of its own", len(lines))
	}
}

func TestIntervalPolicyFlushesInBackground(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncInterval, 3)
	cfg.FsyncInterval = 10 * time.Millisecond
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	writeN(t, w, 0, 2)
	deadline := time.Now().Add(2 * time.Second)
	for bytes.Count(mustRead(t, cfg.Path), []byte("\n")) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("buffered records not written within 2s at a 10ms interval")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Write(record(9)); err == nil {
		t.Error("Write after Close succeeded")
	}
}

// TestBackgroundSyncDuringRotationReportsNothing: the interval policy's
// fsync runs outside the writer's lock, so rotation may close the file it
// syncs; that is no error (rotation synced it), and the chain stays whole.
func TestBackgroundSyncDuringRotationReportsNothing(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "4KiB", config.AuditFsyncInterval, 1000)
	cfg.FsyncInterval = time.Millisecond
	w, err := Open(cfg, Options{OnError: func(err error) { t.Errorf("background error: %v", err) }})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 100 {
				if err := w.Write(record(g*1000 + i)); err != nil {
					t.Errorf("Write: %v", err)
				}
				if i%10 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	files := chainFiles(t, cfg.Path)
	if len(files) < 3 {
		t.Fatalf("%d files; the test needs rotations", len(files))
	}
	if res, err := Verify(files...); err != nil || res.Records != 400 || !res.Anchored {
		t.Errorf("Verify: %+v, %v; want 400 chained records", res, err)
	}
}

func TestStdoutSink(t *testing.T) {
	var out bytes.Buffer
	w, err := Open(config.Audit{Sink: config.AuditSinkStdout, Fsync: config.AuditFsyncAlways}, Options{Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 3)
	w.Close()
	path := filepath.Join(t.TempDir(), "captured")
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	if sum, err := Verify(path); err != nil || sum.Records != 3 || !sum.Anchored {
		t.Errorf("Verify(stdout capture) = %+v, %v", sum, err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
