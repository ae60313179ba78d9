package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestLoadRelativePaths checks that state.path and audit.path, like every
// other file name in the file, are relative to the configuration file's
// directory, not to the working directory (#17: "state.path is relative to
// the working directory while every other path is relative to the config
// file").
func TestLoadRelativePaths(t *testing.T) {
	dir := t.TempDir()
	abs := filepath.Join(t.TempDir(), "abs.db")
	for _, c := range []struct {
		name, yaml       string
		wantState, audit string
	}{
		{"default", "", filepath.Join(dir, DefaultStatePath), ""},
		{"relative", "state: {path: state/gw.db}\naudit: {sink: file, path: log/audit.log}\n",
			filepath.Join(dir, "state", "gw.db"), filepath.Join(dir, "log", "audit.log")},
		{"absolute", "state: {path: " + abs + "}\n", abs, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name+".yaml")
			if err := os.WriteFile(path, []byte(minimalYAML+c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.State.Path != c.wantState || cfg.Audit.Path != c.audit {
				t.Errorf("state.path %q, audit.path %q; want %q, %q", cfg.State.Path, cfg.Audit.Path, c.wantState, c.audit)
			}
		})
	}
}

func TestReloadDefaults(t *testing.T) {
	cfg, err := Parse([]byte(minimalYAML), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Reload.Watching() || cfg.Reload.Debounce != DefaultReloadDebounce || *cfg.Listen.ShutdownDelay != DefaultShutdownDelay {
		t.Errorf("reload %+v, shutdown_delay %v; want watching, %v and %v", cfg.Reload, *cfg.Listen.ShutdownDelay,
			DefaultReloadDebounce, DefaultShutdownDelay)
	}
	off := false
	if (Reload{Watch: &off}).Watching() {
		t.Error("watch: false still watches")
	}
	for _, c := range []struct{ name, yaml, want string }{
		{"negative delay", "listen: {shutdown_delay: -1s}\n", "listen.shutdown_delay"},
		{"long delay", "listen: {shutdown_delay: 11m}\n", "listen.shutdown_delay"},
		{"long debounce", "reload: {debounce: 2m}\n", "reload.debounce"},
		{"negative debounce", "reload: {debounce: -1s}\n", "reload.debounce"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse([]byte(minimalYAML+c.yaml), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("Parse = %v, want a problem with %s", err, c.want)
			}
		})
	}
}

func TestWatchedFiles(t *testing.T) {
	cfg := &Config{
		Admin: Admin{TokenFile: "/run/secrets/token"},
		Tenants: []Tenant{{Credentials: []Credential{{PasswordFile: "secrets/a"}, {Password: "inline"}, {PasswordFile: "secrets/a"}}},
			{Credentials: []Credential{{PasswordFile: "/abs/b"}}}},
		Brokers: []Broker{{PasswordFile: "c"}, {}},
		State:   State{Redis: StateRedis{PasswordFile: "redis"}},
	}
	got := cfg.WatchedFiles("/etc/gw")
	want := []string{"/etc/gw/secrets/a", "/abs/b", "/etc/gw/c", "/run/secrets/token"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WatchedFiles (-want +got):\n%s", diff)
	}
}
