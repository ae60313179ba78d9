package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
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
	// A reload that changes the broker's settings builds a new upstream:
	// its calls are metered and audited as before.
	y2 := strings.Replace(y, "password: broker-password-xyz}", "password: broker-password-xyz, timeout: 45s}", 1)
	if err := os.WriteFile(path, []byte(y2), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if code, _ := poll(t, "http://"+s.mainLn.Addr().String(), "tenant-password-xyz"); code != 200 {
		t.Fatalf("call after the reload: %d", code)
	}
	res, err := http.Get(admin + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{
		`osb_gateway_requests_total{broker="b",code="200",endpoint="instance_last_operation",tenant="t"} 2`,
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="instance_last_operation",status_class="2xx"} 2`,
	} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(metrics), "/v2/") {
		t.Errorf("/metrics holds a path:\n%s", metrics)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.shutdown(ctx)
	<-done

	raw, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(raw), `"instance_last_operation"`); n != 2 {
		t.Errorf("%d audit records, want 2 (before and after the reload):\n%s", n, raw)
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

// TestServeExporterNoneTracesNothing: with telemetry.traces.exporter none
// (the default) the gateway starts no spans: a platform's traceparent
// reaches the broker unchanged and its trace id is in the audit record; a
// call without one reaches the broker without one.
func TestServeExporterNoneTracesNothing(t *testing.T) {
	got := make(chan []string, 2)
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Values("Traceparent")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"state":"in progress"}`)
	}))
	defer broker.Close()
	dir := t.TempDir()
	auditFile := filepath.Join(dir, "audit.log")
	y := `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
state: {backend: memory}
audit: {sink: file, path: "` + auditFile + `", fsync: always}
brokers: [{name: b, url: "` + broker.URL + `"}]
tenants: [{name: t, credentials: [{username: u, password: pass}], routes: [{broker: b}]}]
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
	base := "http://" + s.mainLn.Addr().String()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, sent := range []string{tp, ""} {
		req, _ := http.NewRequest("GET", base+"/t/b/v2/service_instances/i/last_operation", nil)
		req.SetBasicAuth("u", "pass")
		req.Header.Set("X-Broker-API-Version", "2.14")
		if sent != "" {
			req.Header.Set("Traceparent", sent)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("status %d", res.StatusCode)
		}
		at := <-got
		if sent != "" && (len(at) != 1 || at[0] != sent) {
			t.Errorf("broker got traceparent %q, want the platform's %q unchanged", at, sent)
		}
		if sent == "" && len(at) != 0 {
			t.Errorf("broker got traceparent %q from a call without one; with exporter none the gateway starts no trace", at)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.shutdown(ctx)
	<-done
	raw, err := os.ReadFile(auditFile)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) ||
		strings.Contains(lines[1], `"trace_id"`) {
		t.Errorf("audit records: want the platform's trace id in the first and none in the second, got\n%s", raw)
	}
}
