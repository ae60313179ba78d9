package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// TestCheckRefusesAMigrationMissingIDs: check fails a route migrating to a
// broker whose catalog lacks a plan id of the old broker's, naming the
// route, both brokers and the id; once the new catalog carries every id,
// check passes.
func TestCheckRefusesAMigrationMissingIDs(t *testing.T) {
	opts := samplebroker.Options{Username: "sample", Password: "sample-secret"}
	oldB, newB := samplebroker.New(opts), samplebroker.New(opts)
	os1, ns := httptest.NewServer(oldB), httptest.NewServer(newB)
	defer os1.Close()
	defer ns.Close()
	var cat map[string]any
	if err := json.Unmarshal(oldB.Catalog(), &cat); err != nil {
		t.Fatal(err)
	}
	svc := cat["services"].([]any)[0].(map[string]any)
	var plans []any
	for _, p := range svc["plans"].([]any) {
		if p.(map[string]any)["id"] != samplebroker.PlanAsyncID {
			plans = append(plans, p)
		}
	}
	svc["plans"] = plans
	doc, _ := json.Marshal(cat)
	if err := newB.SetCatalog(doc); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	y := fmt.Sprintf(`brokers:
  - {name: old, url: %q, username: sample, password: sample-secret}
  - {name: new, url: %q, username: sample, password: sample-secret}
tenants:
  - name: t
    credentials: [{username: u, password: platform-password}]
    routes: [{broker: old, migrate_to: new}]
state: {backend: bolt, path: %q}
`, os1.URL, ns.URL, filepath.Join(dir, "state.db"))
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := runCheck([]string{"-config", path}, &stdout, &stderr)
	want := fmt.Sprintf(`%s: tenants[0].routes[0].migrate_to: the catalog of broker "new" lacks plan ids %q (sample/async) of broker "old"'s catalog, which the platform sees: the route's provisions are refused until it carries them`,
		path, samplebroker.PlanAsyncID)
	if code != 1 || !strings.Contains(stderr.String(), want+"\n") {
		t.Errorf("exit %d, want 1 and %q in:\n%s", code, want, stderr.String())
	}

	newB.ResetCatalog()
	stdout.Reset()
	stderr.Reset()
	if code := runCheck([]string{"-config", path}, &stdout, &stderr); code != 0 || strings.Contains(stderr.String(), "migrate_to") {
		t.Errorf("with every id carried: exit %d, stderr:\n%s", code, stderr.String())
	}
}
