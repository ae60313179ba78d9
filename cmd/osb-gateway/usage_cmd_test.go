package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// TestUsageCommand fills a bolt file on a fake clock (two instances, one
// deleted, and a binding), then reads the report with "osb-gateway usage"
// as CSV and as JSON, and checks the refusals of bad flags.
func TestUsageCommand(t *testing.T) {
	state, _ := boltState(t)
	path := inventoryConfig(t, state)
	cfg, code, ok := loadForInventory(path, "test", os.Stderr)
	if !ok {
		t.Fatalf("config: exit %d", code)
	}
	day := time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)
	clk := osbtest.NewClock(day.Add(10 * time.Hour))
	st, err := backend.Open(storeConfig(cfg.State), clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	put := func(id, plan string, created time.Duration) {
		if _, err := st.PutInstance(ctx, store.Instance{Broker: "b", InstanceID: id, Tenant: "cf", ServiceID: "svc",
			PlanID: plan, Created: day.Add(created)}); err != nil {
			t.Fatal(err)
		}
	}
	put("i1", "small", 0)
	put("i2", "large", 2*time.Hour)
	if _, err := st.PutBinding(ctx, store.Binding{Broker: "b", InstanceID: "i1", BindingID: "x", Tenant: "cf", ServiceID: "svc",
		PlanID: "small", Created: day.Add(3 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DeleteInstance(ctx, "b", "i1"); err != nil { // at 10h, with x
		t.Fatal(err)
	}
	st.Close()

	args := []string{"usage", "-config", path, "-from", "2026-03-02T01:00:00Z", "-to", "2026-03-02T13:30:00Z"}
	code, stdout, stderr := runArgs("", args...)
	wantCSV := "tenant,broker,service_id,service_name,plan_id,plan_name,instance_hours,instances,bindings,live_at_end\n" +
		"cf,b,svc,,large,,11.50,1,0,1\n" +
		"cf,b,svc,,small,,9.00,1,1,0\n"
	if code != 0 || stdout != wantCSV || stderr != "" {
		t.Errorf("usage -format csv: exit %d, stderr %q, stdout:\n%s\nwant:\n%s", code, stderr, stdout, wantCSV)
	}

	code, stdout, stderr = runArgs("", append(args, "-format", "json", "-tenant", "cf")...)
	var rep proxy.UsageReport
	if err := json.Unmarshal([]byte(stdout), &rep); code != 0 || err != nil || stderr != "" {
		t.Fatalf("usage -format json: exit %d, %v, stderr %q, stdout %s", code, err, stderr, stdout)
	}
	want := proxy.UsageReport{From: day.Add(time.Hour), To: day.Add(13*time.Hour + 30*time.Minute), Rows: []proxy.UsageRow{
		{Tenant: "cf", Broker: "b", Service: "svc", Plan: "large", InstanceHours: 11.5, Instances: 1, LiveAtEnd: 1},
		{Tenant: "cf", Broker: "b", Service: "svc", Plan: "small", InstanceHours: 9, Instances: 1, Bindings: 1},
	}}
	if d := cmp.Diff(want, rep); d != "" {
		t.Errorf("usage -format json (-want +got):\n%s", d)
	}

	for _, tc := range []struct {
		name string
		args []string
		code int
		err  string
	}{
		{"bad from", []string{"usage", "-config", path, "-from", "monday"}, exitUsage, "-from must be a time in RFC 3339"},
		{"bad format", []string{"usage", "-config", path, "-format", "xml"}, exitUsage, "-format must be csv or json"},
		{"from after to", []string{"usage", "-config", path, "-from", "2026-03-02T02:00:00Z", "-to", "2026-03-02T01:00:00Z"}, exitFailed,
			"the usage period must start before it ends"},
	} {
		code, _, stderr := runArgs("", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.err) {
			t.Errorf("%s: exit %d, stderr %q; want %d and %q", tc.name, code, stderr, tc.code, tc.err)
		}
	}
}

// On a bolt file the running gateway holds, usage said to read the
// inventory (GET /admin/instances); it points at the usage report's own
// endpoint. And usage -h said "usage: osb-gateway usage: osb-gateway
// usage …": once now.
func TestUsageBoltHeldAndHelp(t *testing.T) {
	state, _ := boltState(t)
	path := inventoryConfig(t, state)
	held := openState(t, path) // the running gateway
	defer held.Close()
	code, stdout, stderr := runArgs("", "usage", "-config", path)
	if code != 1 || stdout != "" || !strings.Contains(stderr, "is locked by another process") || !strings.Contains(stderr, "GET /admin/usage") ||
		strings.Contains(stderr, "/admin/instances") {
		t.Errorf("usage on a held bolt file: exit %d, stdout %q, stderr %s; want 1, pointing at GET /admin/usage", code, stdout, stderr)
	}
	code, _, stderr = runArgs("", "usage", "-h")
	if code != 0 || strings.Count(stderr, "usage:") != 1 || !strings.HasPrefix(stderr, "usage: osb-gateway usage [-config FILE]") {
		t.Errorf("usage -h: exit %d, says:\n%s", code, stderr)
	}
}
