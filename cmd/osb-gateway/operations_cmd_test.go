package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/admin"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

const operationsToken = "operations-cli-admin-token"

// operationsEnv is a gateway in front of the sample broker with its admin
// API on loopback; it returns the gateway's URL, a configuration file
// naming the admin listener and token, and the store.
func operationsEnv(t *testing.T) (gwURL, cfgPath string, st store.Store) {
	t.Helper()
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: -1})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	as := httptest.NewUnstartedServer(nil)
	y := `
admin: {address: "` + as.Listener.Addr().String() + `", token: "` + operationsToken + `"}
state: {backend: memory}
brokers: [{name: b, url: "` + bs.URL + `", username: sample, password: sample-secret}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`
	cfgPath = filepath.Join(t.TempDir(), "gateway.yaml")
	if err := os.WriteFile(cfgPath, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	sw := proxy.NewSwitch(g)
	as.Config.Handler = admin.New(proxy.NewView(sw), admin.Options{Ready: func() error { return nil }, Log: slog.New(slog.DiscardHandler)})
	as.Start()
	t.Cleanup(as.Close)
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return gw.URL, cfgPath, st
}

// asyncProvision provisions id on the async plan through the gateway.
func asyncProvision(t *testing.T, gwURL, id string) {
	t.Helper()
	body := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","organization_guid":"o","space_guid":"s"}`
	req, _ := http.NewRequest(http.MethodPut, gwURL+"/t1/b/v2/service_instances/"+id+"?accepts_incomplete=true", strings.NewReader(body))
	req.SetBasicAuth("t1-user", "t1-pass")
	req.Header.Set("X-Broker-API-Version", "2.14")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body) // read whole: a platform that hangs up on its 202 leaves no operation
	res.Body.Close()
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("async provision of %s: %d", id, res.StatusCode)
	}
}

func runOps(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(append([]string{"operations"}, args...), strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

// TestOperationsCommands: list shows a lock, reconcile settles one by the
// broker's answer and forces another's state, release drops a lock; each
// through the admin API with the file's token, naming the operator.
func TestOperationsCommands(t *testing.T) {
	gwURL, cfgPath, st := operationsEnv(t)
	asyncProvision(t, gwURL, "i1")
	asyncProvision(t, gwURL, "i2")

	code, out, errs := runOps(t, "list", "-config", cfgPath)
	if code != exitOK || !strings.Contains(out, "b/i1") || !strings.Contains(out, "b/i2") || !strings.Contains(errs, "2 operations") {
		t.Fatalf("list: exit %d\n%s%s", code, out, errs)
	}

	code, out, errs = runOps(t, "reconcile", "-config", cfgPath, "-operator", "alice", "b", "i1")
	var res proxy.ReconcileResult
	if code != exitOK || json.Unmarshal([]byte(out), &res) != nil || res.Outcome != proxy.OutcomeSettledSucceeded || !res.Released {
		t.Fatalf("reconcile: exit %d\n%s%s", code, out, errs)
	}
	if _, err := st.Get(context.Background(), store.LockKey("b", "i1")); err == nil {
		t.Error("reconcile: the lock of i1 is still held")
	}

	code, out, errs = runOps(t, "reconcile", "-config", cfgPath, "-operator", "alice", "-state", "failed", "-description", "given up", "b", "i2")
	if code != exitOK || !strings.Contains(out, proxy.OutcomeForcedFailed) {
		t.Fatalf("forced reconcile: exit %d\n%s%s", code, out, errs)
	}
	if l, err := st.Get(context.Background(), store.LockKey("b", "i2")); err != nil || l.Shim.State != store.StateFailed || l.Shim.Description != "given up" {
		t.Errorf("forced reconcile: lock %+v, %v; want its state failed, given up", l, err)
	}

	code, out, errs = runOps(t, "release", "-config", cfgPath, "-operator", "alice", "b", "i2")
	if code != exitFailed || !strings.Contains(errs, "needs a reason") {
		t.Errorf("release without a reason: exit %d\n%s%s", code, out, errs)
	}
	code, out, errs = runOps(t, "release", "-config", cfgPath, "-operator", "alice", "-reason", "the broker lost it", "b", "i2")
	if code != exitOK || !strings.Contains(out, `"released"`) {
		t.Fatalf("release: exit %d\n%s%s", code, out, errs)
	}
	if _, err := st.Get(context.Background(), store.LockKey("b", "i2")); err == nil {
		t.Error("release: the lock of i2 is still held")
	}

	code, _, errs = runOps(t, "reconcile", "-config", cfgPath, "b", "i2")
	if code != exitFailed || !strings.Contains(errs, "404") || !strings.Contains(errs, "nothing to reconcile") {
		t.Errorf("reconcile of a released lock: exit %d %s", code, errs)
	}
}

// TestOperationsUsage: arguments and the token are checked before
// anything is changed.
func TestOperationsUsage(t *testing.T) {
	_, cfgPath, _ := operationsEnv(t)
	wrongToken := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(wrongToken, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no command", nil, exitUsage, "usage: osb-gateway operations"},
		{"unknown command", []string{"drop"}, exitUsage, `unknown command "drop"`},
		{"reconcile without an instance", []string{"reconcile", "-config", cfgPath, "b"}, exitUsage, "expected BROKER INSTANCE [BINDING], got 1"},
		{"another token", []string{"list", "-config", cfgPath, "-token-file", wrongToken}, exitFailed, "answered 401"},
		{"no admin listener", []string{"list", "-config", filepath.Join(t.TempDir(), "none.yaml")}, exitUsage, "none.yaml"},
		{"bad state", []string{"reconcile", "-config", cfgPath, "-state", "done", "b", "i"}, exitFailed, `a forced state is \"succeeded\" or \"failed\": got \"done\"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runOps(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.want) {
				t.Errorf("exit %d, want %d with %q:\n%s%s", code, tc.code, tc.want, out, errs)
			}
		})
	}
}
