package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestServeObservability: the served gateway exports Prometheus metrics on
// the admin listener and writes a verifiable audit log, with no secret in
// it.
func TestServeObservability(t *testing.T) {
	broker := lastOpBroker("ok")
	defer broker.Close()
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	y := `
listen: {address: "127.0.0.1:0"}
admin: {address: "127.0.0.1:0"}
state: {backend: memory}
audit: {sink: file, path: "` + auditFile + `", fsync: always}
brokers: [{name: b, url: "` + broker.URL + `", username: broker-user, password: broker-password-xyz}]
tenants: [{name: t, credentials: [{username: u, password: tenant-password-xyz}], routes: [{broker: b}]}]
`
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := newServer(cfg, path, newLogs(cfg.Log, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.serve() }()
	admin := "http://" + s.adminLn.Addr().String()
	waitReady(t, admin)
	if code, _ := poll(t, "http://"+s.mainLn.Addr().String(), "tenant-password-xyz"); code != 200 {
		t.Fatalf("call: %d", code)
	}
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(metrics), "osb_gateway_requests") || strings.Contains(string(metrics), "/v2/") {
		t.Errorf("/metrics:\n%s", metrics)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.shutdown(ctx)
	<-done

	raw, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"instance_last_operation"`) {
		t.Errorf("audit record missing:\n%s", raw)
	}
	for _, secret := range []string{"tenant-password-xyz", "broker-password-xyz", "Basic "} {
		if bytes.Contains(raw, []byte(secret)) {
			t.Errorf("audit log holds %q", secret)
		}
	}
	var out, errOut bytes.Buffer
	if code := runAudit([]string{"verify", auditFile}, &out, &errOut); code != 0 {
		t.Errorf("audit verify: %d %s %s", code, out.String(), errOut.String())
	}
}
