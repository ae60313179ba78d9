package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// watchConfig has a short debounce and a tenant password from a file;
// BROKER_URL and PASSWORD_FILE are replaced.
const watchConfig = `
listen: {address: "127.0.0.1:0", shutdown_delay: 0s}
state: {backend: memory}
admin: {address: "127.0.0.1:0", token: an-admin-token-of-some-length}
log: {format: json, level: info}
reload: {debounce: 10ms}
brokers:
  - name: b
    url: BROKER_URL
tenants:
  - name: t
    credentials: [{username: u, password_file: PASSWORD_FILE}]
    routes: [{broker: b}]
`

// swapDir replaces dir's files the way the kubelet updates a ConfigMap or
// Secret volume: files in a new timestamped directory, a "..data_tmp"
// symlink to it renamed over "..data", each file a symlink through
// "..data", the old directory removed.
func swapDir(t *testing.T, dir, version string, files map[string]string) {
	t.Helper()
	ts := "..2026_" + version
	if err := os.Mkdir(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Symlink(ts, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				t.Fatal(err)
			}
		}
	}
	if old != "" {
		_ = os.RemoveAll(filepath.Join(dir, old))
	}
}

// writeAtomic writes data to a temporary file and renames it over path,
// as editors and configuration management do.
func writeAtomic(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// scrapeMetrics returns the admin listener's /metrics page.
func scrapeMetrics(t *testing.T, s *server) string {
	t.Helper()
	res, err := http.Get("http://" + s.adminLn.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}

// TestWatchReloads: a change on disk is applied without a signal, whether
// the file is replaced by a rename, by a Kubernetes ConfigMap swap, or a
// password file it names changes (a Kubernetes Secret swap); a file with
// problems is counted as a failed reload and the running configuration
// stays. Each step waits for its outcome on the wire.
func TestWatchReloads(t *testing.T) {
	broker := named("one")
	defer broker.Close()
	root := t.TempDir()
	cfgDir, secretDir := filepath.Join(root, "config"), filepath.Join(root, "secrets")
	for _, d := range []string{cfgDir, secretDir} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := strings.NewReplacer("BROKER_URL", broker.URL, "PASSWORD_FILE", "../secrets/password").Replace(watchConfig)
	swapDir(t, cfgDir, "1", map[string]string{"gateway.yaml": cfg})
	swapDir(t, secretDir, "1", map[string]string{"password": "first-password\n"})
	path := filepath.Join(cfgDir, "gateway.yaml")
	s := startServer(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.watch(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.mainLn.Addr().String()
	answers := func(pass string) func() bool {
		return func() bool { code, _ := poll(t, base, pass); return code == 200 }
	}
	if !answers("first-password")() {
		t.Fatal("the first password is refused")
	}
	if m := scrapeMetrics(t, s); !strings.Contains(m, `osb_gateway_config_info{hash="`+hashFile(path)+`"} 1`) ||
		!strings.Contains(m, `osb_gateway_config_reload_total{result="failure"} 0`) {
		t.Errorf("the configuration series are not there from the start:\n%s", m)
	}

	swapDir(t, secretDir, "2", map[string]string{"password": "second-password\n"})
	waitFor(t, "the Secret swap is applied", answers("second-password"))

	third := strings.Replace(cfg, "password_file: ../secrets/password", "password: third-password", 1)
	swapDir(t, cfgDir, "2", map[string]string{"gateway.yaml": third})
	waitFor(t, "the ConfigMap swap is applied", answers("third-password"))

	// A plain directory: the symlinks replaced by a file renamed over them.
	writeAtomic(t, path, strings.Replace(third, "third-password", "fourth-password", 1))
	waitFor(t, "the renamed file is applied", answers("fourth-password"))
	if m := scrapeMetrics(t, s); !strings.Contains(m, `osb_gateway_config_info{hash="`+hashFile(path)+`"} 1`) {
		t.Errorf("osb_gateway_config_info does not carry the new file's hash:\n%s", m)
	}

	writeAtomic(t, path, "tenants: [")
	waitFor(t, "the bad file is counted as a failed reload", func() bool {
		return strings.Contains(scrapeMetrics(t, s), `osb_gateway_config_reload_total{result="failure"} 1`)
	})
	if !answers("fourth-password")() {
		t.Error("a bad file replaced the running configuration")
	}
	if m := scrapeMetrics(t, s); !strings.Contains(m, `osb_gateway_config_reload_total{result="success"} 3`) {
		t.Errorf("want 3 successful reloads, one per change:\n%s", m)
	}
}

// TestAdminReload: POST /admin/reload needs the admin token, reloads the
// file and answers what is now in force; a file with problems is refused
// with 422 and its problems, and the running configuration stays.
func TestAdminReload(t *testing.T) {
	broker := named("one")
	defer broker.Close()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "password"), []byte("first-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gateway.yaml")
	cfg := strings.NewReplacer("BROKER_URL", broker.URL, "PASSWORD_FILE", "password", "debounce: 10ms", "watch: false").Replace(watchConfig)
	writeAtomic(t, path, cfg)
	s := startServer(t, path)
	base := "http://" + s.mainLn.Addr().String()
	reload := func(token string) (int, map[string]any) {
		req, _ := http.NewRequest("POST", "http://"+s.adminLn.Addr().String()+"/admin/reload", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, body
	}
	if code, _ := reload(""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d, want 401", code)
	}
	if err := os.WriteFile(filepath.Join(dir, "password"), []byte("second-password"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, body := reload("an-admin-token-of-some-length")
	want := map[string]any{"result": "success", "config_hash": hashFile(path), "tenants": 1.0, "brokers": 1.0}
	if diff := cmp.Diff(want, body); code != 200 || diff != "" {
		t.Errorf("reload: %d (-want +got):\n%s", code, diff)
	}
	if code, _ := poll(t, base, "second-password"); code != 200 {
		t.Errorf("the new password after the reload: %d", code)
	}

	writeAtomic(t, path, strings.Replace(cfg, "url: "+broker.URL, "url: not-a-url", 1))
	code, body = reload("an-admin-token-of-some-length")
	desc, _ := body["description"].(string)
	if code != http.StatusUnprocessableEntity || !strings.Contains(desc, "brokers[0].url") || !strings.Contains(desc, "running configuration stays") {
		t.Errorf("reload of a bad file: %d %v", code, body)
	}
	if code, _ := poll(t, base, "second-password"); code != 200 {
		t.Errorf("a refused reload changed the running configuration: %d", code)
	}
	m := scrapeMetrics(t, s)
	for _, want := range []string{`osb_gateway_config_reload_total{result="success"} 1`, `osb_gateway_config_reload_total{result="failure"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
