package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// TestCheckReportsDrift: check compares each broker's live catalog with
// the accepted one in the state store: the sample broker's sync plan
// removed under a live instance is a warning naming the plan and the
// instance count; drift does not fail the check. Without a state file it
// says it did not check.
func TestCheckReportsDrift(t *testing.T) {
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret"})
	bs := httptest.NewServer(broker)
	defer bs.Close()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.yaml")
	y := fmt.Sprintf("state: {backend: bolt, path: state.db}\nbrokers: [{name: b, url: %q, username: sample, password: sample-secret}]\n"+
		"tenants: [{name: t, credentials: [{username: u, password: a-long-platform-secret}], routes: [{broker: b}]}]\n", bs.URL)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func() (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runCheck([]string{"-config", path}, &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	if code, out, _ := check(); code != 0 || !strings.Contains(out, "catalog drift not checked: no state file") {
		t.Fatalf("without a state file: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db")); err == nil {
		t.Fatal("check created the state file")
	}

	// The gateway accepted the broker's catalog and recorded an instance
	// on the sync plan; then the broker dropped the plan.
	ctx := context.Background()
	st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(dir, "state.db")}, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	accepted := broker.Catalog()
	if err := st.PutCatalogs(ctx, store.BrokerCatalogs{Broker: "b", AcceptedBy: "gateway",
		Accepted: store.KeptCatalog{Hash: "accepted-hash", At: time.Now(), Body: accepted}}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutInstance(ctx, store.Instance{Broker: "b", InstanceID: "i1", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	var doc struct {
		Services []map[string]any `json:"services"`
	}
	if err := json.Unmarshal(accepted, &doc); err != nil {
		t.Fatal(err)
	}
	plans := doc.Services[0]["plans"].([]any)
	doc.Services[0]["plans"] = plans[1:] // sync is the first plan
	changed, _ := json.Marshal(doc)
	if err := broker.SetCatalog(changed); err != nil {
		t.Fatal(err)
	}

	code, out, errs := check()
	if code != 0 {
		t.Errorf("exit %d, want 0 (drift warns)\n%s%s", code, out, errs)
	}
	if want := `warning: broker "b" catalog drift: plan_removed: plan "sync" of service "sample"`; !strings.Contains(errs, want) || !strings.Contains(errs, "(1 instance live)") {
		t.Errorf("stderr lacks %q with 1 instance live:\n%s", want, errs)
	}
	if want := `broker "b": catalog drift from the accepted catalog`; !strings.Contains(out, want) || !strings.Contains(out, "1 item") {
		t.Errorf("stdout lacks %q: 1 item:\n%s", want, out)
	}
}
