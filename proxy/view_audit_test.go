package proxy

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// viewWithAudit is the View of a gateway whose audit records go to the
// file path through w.
func viewWithAudit(t *testing.T, sink string) (v *View, w *audit.Writer, path string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "audit.log")
	cfg, err := config.Parse([]byte(`
audit: {sink: `+sink+`, path: "`+path+`", fsync: never, fsync_interval: 1h}
brokers: [{name: b, url: "http://127.0.0.1:1", username: u, password: p}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	var opts Options
	if sink == config.AuditSinkFile {
		if w, err = audit.Open(cfg.Audit, audit.Options{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { w.Close() })
		opts.Audit = &AuditOptions{Writer: w}
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	opts.Store, opts.Logger = st, slog.New(slog.DiscardHandler)
	g, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	return NewView(NewSwitch(g)), w, path
}

// The audit page searches the records newest first, including those the
// writer still buffers, and says whether the chain verifies and, when it
// does not, at which file and line.
func TestViewAuditRecordsAndVerdict(t *testing.T) {
	v, w, path := viewWithAudit(t, config.AuditSinkFile)
	ctx := context.Background()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i, st := range []int{201, 400, 202, 404} {
		if err := w.Write(&audit.Record{Time: t0.Add(time.Duration(i) * time.Minute), RequestID: "r" + string(rune('0'+i)), Tenant: "t1", Broker: "b",
			Endpoint: "provision", Method: "PUT", InstanceID: "i1", Status: st, Outcome: "forwarded"}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := v.AuditRecords(ctx, AuditQuery{Filter: audit.Filter{InstanceID: "i1", Status: "4xx"}})
	if err != nil || page.Matched != 2 || len(page.Records) != 2 || page.Records[0].RequestID != "r3" || page.Records[1].RequestID != "r1" {
		t.Fatalf("the 4xx records of i1: %+v, %v; want r3 then r1 (the writer's buffer flushed first)", page, err)
	}
	vd, err := v.VerifyAudit(ctx)
	if err != nil || !vd.Intact || vd.Records != 4 || !vd.Anchored {
		t.Fatalf("the intact chain: %+v, %v", vd, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(`"status":202`), []byte(`"status":200`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	vd, err = v.VerifyAudit(ctx)
	if err != nil || vd.Intact || vd.Broken == nil || vd.Broken.File != path || vd.Broken.Line != 3 || vd.Records != 2 {
		t.Fatalf("the edited chain: %+v, %v; want it broken at %s line 3, 2 records intact before", vd, err, path)
	}
	if _, err := v.AuditRecords(ctx, AuditQuery{Skip: MaxAuditPage}); err == nil || !strings.Contains(err.Error(), "at most") {
		t.Errorf("a search past MaxAuditPage: %v", err)
	}
}

func TestViewAuditWithoutAFile(t *testing.T) {
	v, _, _ := viewWithAudit(t, config.AuditSinkOff)
	if _, err := v.AuditRecords(context.Background(), AuditQuery{}); !errors.Is(err, ErrNoAuditFile) {
		t.Errorf("records without a file sink: %v, want ErrNoAuditFile", err)
	}
	if _, err := v.VerifyAudit(context.Background()); !errors.Is(err, ErrNoAuditFile) {
		t.Errorf("verify without a file sink: %v, want ErrNoAuditFile", err)
	}
}
