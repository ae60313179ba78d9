package audit

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// cutLines keeps the first n lines of the file at path.
func cutLines(t *testing.T, path string, n int) {
	t.Helper()
	lines := bytes.SplitAfter(mustRead(t, path), []byte("\n"))
	if err := os.WriteFile(path, bytes.Join(lines[:n], nil), 0o640); err != nil {
		t.Fatal(err)
	}
}

func mustHead(t *testing.T, path string) *Head {
	t.Helper()
	h, err := ReadHead(HeadPath(path))
	if err != nil {
		t.Fatal(err)
	}
	return &h
}

// TestVerifyFindsRecordsCutOffTheEnd is the case: "audit verify"
// said "ok: 21 records" for a 23-record file cut short.
func TestVerifyFindsRecordsCutOffTheEnd(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncAlways, 3)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 23)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	head := mustHead(t, cfg.Path)
	if head.Records != 23 || head.File != "audit.log" || head.LastHash != hashOf(bytes.TrimSuffix(lastLineOf(t, cfg.Path), []byte("\n"))) {
		t.Fatalf("head %+v: want 23 records of audit.log and the last record's hash", head)
	}
	if sum, err := (VerifyOptions{Head: head}).Verify(cfg.Path); err != nil || sum.Records != 23 {
		t.Fatalf("Verify intact = %+v, %v", sum, err)
	}

	cutLines(t, cfg.Path, 21)
	if sum, err := Verify(cfg.Path); err != nil || sum.Records != 21 {
		t.Fatalf("without its head the chain is intact: %+v, %v", sum, err)
	}
	_, err = VerifyOptions{Head: head}.Verify(cfg.Path)
	var cut *HeadMismatchError
	if !errors.As(err, &cut) || cut.Rewritten || !strings.Contains(err.Error(), "23 records at the head") ||
		!strings.Contains(err.Error(), "21 in the file") {
		t.Errorf("Verify against the head = %v; want cut short: 23 records at the head, 21 in the file", err)
	}
	if _, err := Open(cfg, Options{}); !errors.As(err, &cut) {
		t.Errorf("Open of a file shorter than its head = %v; want it refused", err)
	}

	// fsync never: a machine crash can lose what the head names, so the
	// writer goes on and says so.
	cfg.Fsync = config.AuditFsyncNever
	var reported []error
	w, err = Open(cfg, Options{OnError: func(e error) { reported = append(reported, e) }})
	if err != nil {
		t.Fatalf("Open with fsync never = %v", err)
	}
	w.Close()
	if len(reported) != 1 || !errors.As(reported[0], &cut) {
		t.Errorf("reported %v; want the cut once", reported)
	}
}

func lastLineOf(t *testing.T, path string) []byte {
	lines := bytes.SplitAfter(bytes.TrimSuffix(mustRead(t, path), []byte("\n")), []byte("\n"))
	return lines[len(lines)-1]
}

func TestVerifyFindsARewrittenLastRecord(t *testing.T) {
	path, lines := goodFile(t, 4)
	head := mustHead(t, path)
	// The last record dropped and the one before re-chained in its place
	// would need its hash; a plain chain lets anyone recompute it.
	rewrite(t, path, rehash(t, lines[:4], 3, false, func(_ int, r *Record) { r.Status = 500 }))
	_, err := VerifyOptions{Head: head}.Verify(path)
	var cut *HeadMismatchError
	if !errors.As(err, &cut) || !cut.Rewritten {
		t.Errorf("Verify = %v; want the last record named rewritten", err)
	}
}

// TestHeadFollowsRotation: a head written before a rotation it could not
// follow (a crash in between) names the file as it was rotated.
func TestHeadFollowsRotation(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "4KiB", config.AuditFsyncAlways, 100)
	w, err := Open(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	writeN(t, w, 0, 20)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	before := mustRead(t, HeadPath(cfg.Path))
	old := mustHead(t, cfg.Path)
	writeN(t, w, 20, 40) // rotates at least once more
	w.Close()
	if h := mustHead(t, cfg.Path); h.Seq <= old.Seq {
		t.Fatalf("head seq %d after rotations, was %d", h.Seq, old.Seq)
	}
	files := chainFiles(t, cfg.Path)
	if _, err := (VerifyOptions{Head: mustHead(t, cfg.Path)}).Verify(files...); err != nil {
		t.Errorf("Verify with the current head: %v", err)
	}
	if err := os.WriteFile(HeadPath(cfg.Path), before, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := (VerifyOptions{Head: old}).Verify(files...); err != nil {
		t.Errorf("Verify with the head from before the rotation: %v", err)
	}
	w, err = Open(cfg, Options{})
	if err != nil {
		t.Fatalf("Open with the head from before the rotation: %v", err)
	}
	w.Close()
}

// TestHeadLoggedAtInterval: on each head tick the stored head is handed
// to OnHead, once per change; Close hands out the last one.
func TestHeadLoggedAtInterval(t *testing.T) {
	dir := t.TempDir()
	cfg := fileConfig(dir, "1MiB", config.AuditFsyncInterval, 3)
	ticks := make(chan time.Time)
	heads := make(chan Head, 10)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	w, err := Open(cfg, Options{HeadTicks: ticks, OnHead: func(h Head) { heads <- h }, Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	next := func() Head {
		t.Helper()
		select {
		case h := <-heads:
			return h
		case <-time.After(10 * time.Second):
			t.Fatal("no head handed out")
			return Head{}
		}
	}
	writeN(t, w, 0, 3)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ticks <- at
	h := next()
	if h.Records != 3 || h.File != "audit.log" || !h.Time.Equal(at) {
		t.Errorf("head %+v: want 3 records of audit.log at %v", h, at)
	}
	if diff := cmp.Diff(*mustHead(t, cfg.Path), h); diff != "" {
		t.Errorf("logged head differs from the head file (-file +logged):\n%s", diff)
	}
	ticks <- at // nothing new: nothing handed out
	writeN(t, w, 3, 4)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	ticks <- at
	if h := next(); h.Records != 4 {
		t.Errorf("second head %+v: want 4 records (and no head for the tick without records)", h)
	}
	writeN(t, w, 4, 5)
	w.Close()
	if h := next(); h.Records != 5 {
		t.Errorf("head at Close %+v: want 5 records", h)
	}
}
