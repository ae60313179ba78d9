package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store/postgres"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestCheckReportsPostgres: with state.backend postgres, check says
// whether the database answers and where its schema stands, and creates
// nothing; the gateway creates the schema at start, after which check
// calls it current. A database that does not answer is a warning that
// does not fail the check, and its URL's password is not in it.
func TestCheckReportsPostgres(t *testing.T) {
	srv := storetest.StartPostgres(t)
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret"})
	bs := httptest.NewServer(broker)
	defer bs.Close()
	dir := t.TempDir()
	cfg := srv.StoreConfig(t)
	write := func(url string) string {
		path := filepath.Join(dir, "gateway.yaml")
		y := fmt.Sprintf("state: {backend: postgres, postgres: {url: %q, connect_timeout: 2s}}\n"+
			"brokers: [{name: b, url: %q, username: sample, password: sample-secret}]\n"+
			"tenants: [{name: t, credentials: [{username: u, password: a-long-platform-secret}], routes: [{broker: b}]}]\n", url, bs.URL)
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	check := func(path string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runCheck([]string{"-config", path}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	path := write(cfg.Postgres.URL)
	want := fmt.Sprintf("state: postgres answers; no schema yet: the gateway creates version %d at start", postgres.SchemaVersion)
	for range 2 { // the second time: check created nothing
		if code, out, errs := check(path); code != 0 || !strings.Contains(out, want) {
			t.Fatalf("empty database: exit %d, want 0 and %q\n%s%s", code, want, out, errs)
		}
	}
	loaded, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	gw, _, err := openStore(loaded.State, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	gw.Close()
	want = fmt.Sprintf("state: postgres answers; schema version %d, current", postgres.SchemaVersion)
	if code, out, errs := check(path); code != 0 || !strings.Contains(out, want) {
		t.Fatalf("after the gateway's start: exit %d, want 0 and %q\n%s%s", code, want, out, errs)
	}

	const secret = "pg-s3cret"
	path = write(strings.Replace(cfg.Postgres.URL, "postgres@"+srv.Addr, "postgres:"+secret+"@"+osbtest.DeadAddr(t), 1))
	code, out, errs := check(path)
	if code != 0 || !strings.Contains(errs, "warning: state: postgres does not answer") || strings.Contains(out+errs, secret) {
		t.Fatalf("database down: exit %d, want 0 and a warning without the password\n%s%s", code, out, errs)
	}
}
