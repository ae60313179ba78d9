package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestRedisLossRefusedUntilAccepted: a gateway on a Redis that restarts
// empty under it (no persistence) refuses mutating calls with 503, where it
// used to go on with an empty store and let an update through during the
// async provision whose lock Redis forgot; state status says the data is
// lost; state accept-loss -import stores the inventory lines and accepts
// the loss, and the gateway serves again with the imported record.
func TestRedisLossRefusedUntilAccepted(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	r := storetest.StartRedis(t)
	dir, broker := t.TempDir(), sampleBrokerServer(t)
	state := fmt.Sprintf(`{backend: redis, redis: {addrs: [%q], key_prefix: "loss:"}}`, r.Addr)
	gw := startGateway(t, dir, "gw", state, broker.URL)
	config := filepath.Join(dir, "gw.yaml")
	if code, body := gw.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Fatalf("provision: %d %s", code, body)
	}
	cli := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := run(append(args, "-config", config), strings.NewReader(""), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if code, out := cli("state", "status"); code != exitOK || !strings.Contains(out, "holds the gateway's data") {
		t.Errorf("state status before the loss: exit %d: %s", code, out)
	}
	if code, out := cli("check"); code != exitOK || !strings.Contains(out, "state: redis answers; epoch") {
		t.Errorf("check before the loss: exit %d: %s", code, out)
	}
	if code, out := cli("state", "accept-loss"); code != exitFailed || !strings.Contains(out, "nothing to accept") {
		t.Errorf("state accept-loss before any loss: exit %d: %s", code, out)
	}

	r.RestartEmpty()
	const unavailable = `{"description":"the gateway's operation state is unavailable, so it cannot tell whether another operation on this instance is in progress; try again later"}` + "\n"
	if code, body := gw.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 503 || body != unavailable {
		t.Errorf("update during the async provision Redis forgot: %d %s, want 503 %s", code, body, unavailable)
	}
	if code, body := gw.call(t, "PUT", "/v2/service_instances/i2?accepts_incomplete=true", asyncProvisionBody); code != 503 || body != unavailable {
		t.Errorf("provision after the loss: %d %s, want 503", code, body)
	}
	code, out := cli("state", "status")
	if code != exitFailed || !strings.Contains(out, "LOST") || !strings.Contains(out, "accept-loss") {
		t.Errorf("state status after the loss: exit %d: %s", code, out)
	}
	if code, out := cli("check"); code != exitOK || !strings.Contains(out, "warning: state: redis lost the gateway's data") {
		t.Errorf("check after the loss: exit %d: %s, want 0 and a warning", code, out)
	}
	if code, out := cli("inventory", "export"); code != exitFailed || !strings.Contains(out, "osb-gateway state accept-loss") {
		t.Errorf("inventory export after the loss: exit %d: %s, want a refusal naming state accept-loss", code, out)
	}

	lines := filepath.Join(dir, "inventory.jsonl")
	entry, _ := json.Marshal(map[string]any{"instance": map[string]string{"broker": "b", "instance_id": "i1", "tenant": "t",
		"service_id": samplebroker.ServiceID, "plan_id": samplebroker.PlanAsyncID}})
	if err := os.WriteFile(lines, append(entry, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, out := cli("state", "accept-loss", "-import", lines); code != exitOK || !strings.Contains(out, "1 written") ||
		!strings.Contains(out, "accepted the loss") {
		t.Fatalf("state accept-loss: exit %d: %s", code, out)
	}
	if code, body := gw.call(t, "PUT", "/v2/service_instances/i2?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Errorf("provision after the acceptance: %d %s, want 202", code, body)
	}
	code, out = cli("inventory", "export")
	if code != exitOK || !strings.Contains(out, `"instance_id":"i1"`) {
		t.Errorf("inventory export after the acceptance: exit %d: %s, want the imported i1", code, out)
	}
	if code, out := cli("state", "status"); code != exitOK || !strings.Contains(out, "accepted") {
		t.Errorf("state status after the acceptance: exit %d: %s", code, out)
	}
}

// TestStateCommandsOtherBackends: state status and accept-loss say why
// there is nothing to do on a store that keeps its data.
func TestStateCommandsOtherBackends(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gw.yaml")
	y := fmt.Sprintf("state: {backend: bolt, path: %q}\nbrokers: [{name: b, url: \"http://127.0.0.1:1\"}]\n"+
		"tenants: [{name: t, credentials: [{username: u, password: pass}], routes: [{broker: b}]}]\n", filepath.Join(dir, "s.db"))
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"status", "accept-loss"} {
		var stdout, stderr bytes.Buffer
		code := run([]string{"state", cmd, "-config", path}, strings.NewReader(""), &stdout, &stderr)
		if code != exitFailed || !strings.Contains(stderr.String(), "keeps its data through a restart") {
			t.Errorf("state %s on bolt: exit %d: %s%s", cmd, code, stdout.String(), stderr.String())
		}
	}
}
