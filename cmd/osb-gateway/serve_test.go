package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// serveConfig is a one-tenant configuration; %s are the broker URL and the
// tenant's password.
const serveConfig = `
listen: {address: "127.0.0.1:0", shutdown_grace: 5s, shutdown_delay: 0s}
state: {backend: memory}
admin: {address: "127.0.0.1:0"}
log: {format: json, level: info}
brokers:
  - name: b
    url: BROKER_URL
tenants:
  - name: t
    credentials: [{username: u, password: TENANT_PASS}]
    routes: [{broker: b}]
`

func writeConfig(t *testing.T, path, brokerURL, pass string) {
	t.Helper()
	y := strings.NewReplacer("BROKER_URL", brokerURL, "TENANT_PASS", pass).Replace(serveConfig)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

// startServer runs a server from the configuration file at path, as
// runServe does, and stops it when the test ends.
func startServer(t *testing.T, path string) *server {
	t.Helper()
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
	waitReady(t, "http://"+s.adminLn.Addr().String())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.shutdown(ctx)
		<-done
	})
	return s
}

func waitReady(t *testing.T, admin string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := http.Get(admin + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("gateway never became ready")
}

// poll sends a last_operation request (passed through to the broker) as
// tenant t with password pass.
func poll(t *testing.T, base, pass string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/t/b/v2/service_instances/i/last_operation", nil)
	req.SetBasicAuth("u", pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func named(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"broker":"`+name+`"}`)
	}))
}

func TestReload(t *testing.T) {
	one, two := named("one"), named("two")
	defer one.Close()
	defer two.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeConfig(t, path, one.URL, "first")
	s := startServer(t, path)
	base := "http://" + s.mainLn.Addr().String()

	if code, body := poll(t, base, "first"); code != 200 || !strings.Contains(body, "one") {
		t.Fatalf("before reload: %d %s", code, body)
	}
	writeConfig(t, path, two.URL, "second")
	if err := s.reload(); err != nil {
		t.Fatalf("reload of a good file: %v", err)
	}
	if code, _ := poll(t, base, "first"); code != 401 {
		t.Errorf("old password still accepted after reload: %d", code)
	}
	if code, body := poll(t, base, "second"); code != 200 || !strings.Contains(body, "two") {
		t.Errorf("after reload: %d %s", code, body)
	}

	// A bad file keeps the running configuration.
	if err := os.WriteFile(path, []byte("brokers: [{name: b, url: 'ftp://x'}]\nbogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := s.reload()
	if err == nil || !strings.Contains(err.Error(), "bogus") || !strings.Contains(err.Error(), "brokers[0].url") {
		t.Errorf("bad file: reload error %v should name every problem", err)
	}
	if code, body := poll(t, base, "second"); code != 200 || !strings.Contains(body, "two") {
		t.Errorf("after a refused reload: %d %s", code, body)
	}
}

// TestReloadInFlight: a request that started before a reload finishes on
// the configuration it started with.
func TestReloadInFlight(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		<-release
		_, _ = io.WriteString(w, `{"broker":"old"}`)
	}))
	defer slow.Close()
	fresh := named("new")
	defer fresh.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeConfig(t, path, slow.URL, "pw")
	s := startServer(t, path)
	base := "http://" + s.mainLn.Addr().String()

	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		c, b := poll(t, base, "pw")
		got <- answer{c, b}
	}()
	<-entered
	writeConfig(t, path, fresh.URL, "pw")
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	if code, body := poll(t, base, "pw"); code != 200 || !strings.Contains(body, "new") {
		t.Errorf("new request after reload: %d %s", code, body)
	}
	close(release)
	if a := <-got; a.code != 200 || !strings.Contains(a.body, "old") {
		t.Errorf("in-flight request: %d %s", a.code, a.body)
	}
}

// TestGracefulShutdown holds both servers of the platform listener to the
// drain: an in-flight call finishes, the listener stops accepting.
func TestGracefulShutdown(t *testing.T) {
	for _, kind := range []string{config.ServerLean, config.ServerStandard} {
		t.Run(kind, func(t *testing.T) { testGracefulShutdown(t, kind) })
	}
}

func testGracefulShutdown(t *testing.T, kind string) {
	var inFlight atomic.Int32
	entered := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inFlight.Add(1)
		close(entered)
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(w, `{"done":true}`)
	}))
	defer slow.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeConfig(t, path, slow.URL, "pw")
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen.Server = kind
	s, err := newServer(cfg, path, newLogs(cfg.Log, io.Discard))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.serverKind(); got != kind {
		t.Fatalf("listen.server %s served by %s", kind, got)
	}
	done := make(chan error, 1)
	go func() { done <- s.serve() }()
	base, admin := "http://"+s.mainLn.Addr().String(), "http://"+s.adminLn.Addr().String()
	waitReady(t, admin)

	type answer struct {
		code int
		body string
	}
	got := make(chan answer, 1)
	go func() {
		c, b := poll(t, base, "pw")
		got <- answer{c, b}
	}()
	<-entered
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.shutdown(ctx); err != nil {
		t.Fatalf("shutdown within the grace period: %v", err)
	}
	if a := <-got; a.code != 200 || a.body != `{"done":true}` {
		t.Errorf("in-flight request during shutdown: %d %s", a.code, a.body)
	}
	if err := <-done; err != nil {
		t.Errorf("serve: %v", err)
	}
	if _, err := http.Get(base + "/t/b/v2/service_instances/i/last_operation"); err == nil {
		t.Error("the listener still accepts after shutdown")
	}
	if s.readiness() == nil {
		t.Error("still ready after shutdown")
	}
}
