package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const checkValidYAML = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: mysql
      - broker: pg
  - name: cf-dev
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: mysql
brokers:
  - name: mysql
    url: https://mysql.example.com
  - name: pg
    url: https://pg.example.com
`

const checkInvalidYAML = `tenants:
  - name: cf-prod
    credentials:
      - username: cc
        password: platform-password
    routes:
      - broker: redis
brokers:
  - name: mysql
    url: mysql.example.com
    timeoutt: 30s
`

func TestRunCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	valid := write("valid.yaml", checkValidYAML)
	single := write("single.yaml", `tenants: [{name: a, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
brokers: [{name: b, url: "https://b.example.com"}]
`)
	invalid := write("invalid.yaml", checkInvalidYAML)
	missing := filepath.Join(dir, "missing.yaml")

	tests := []struct {
		name      string
		args      []string
		code      int
		stdout    string
		stderr    string // exact, unless stderrHas is set
		stderrHas string
	}{
		{
			name:   "valid",
			args:   []string{"-config", valid},
			stdout: valid + ": valid (2 tenants, 2 brokers, 3 routes)\n",
		},
		{
			name:   "valid, singular counts",
			args:   []string{"-config=" + single},
			stdout: single + ": valid (1 tenant, 1 broker, 1 route)\n",
			// A one-character plain-text password was accepted silently.
			stderr: single + ": warning: tenants[0].credentials[0].password: a plain-text password shorter than 12 characters (it has 1) is easy to guess; use 12 or more (or a bcrypt hash: osb-gateway hash-password)\n",
		},
		{
			name: "invalid",
			args: []string{"-config", invalid},
			code: 1,
			// Semantic problems name their line too (they did not).
			stderr: invalid + `: tenants[0].routes[0].broker: no broker is named "redis" (brokers: mysql) (line 7)` + "\n" +
				invalid + ": brokers[0].url: must be an absolute http or https URL (line 10)\n" +
				invalid + ": brokers[0].timeoutt: unknown key (line 11)\n" +
				invalid + ": 3 problems\n",
		},
		{
			name:      "unreadable",
			args:      []string{"-config", missing},
			code:      2,
			stderrHas: "no such file or directory",
		},
		{
			name:      "unknown flag",
			args:      []string{"-conf", valid},
			code:      2,
			stderrHas: "flag provided but not defined: -conf",
		},
		{
			name:      "extra argument",
			args:      []string{"-config", valid, "other.yaml"},
			code:      2,
			stderrHas: `unexpected argument "other.yaml"`,
		},
		{
			name:      "help",
			args:      []string{"-h"},
			code:      0,
			stderrHas: "usage: osb-gateway check [-config FILE] [-offline]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck(append([]string{"-offline"}, tt.args...), &stdout, &stderr)
			if code != tt.code {
				t.Errorf("exit code = %d, want %d\nstderr: %s", code, tt.code, stderr.String())
			}
			if diff := cmp.Diff(tt.stdout, stdout.String()); diff != "" {
				t.Errorf("stdout (-want +got):\n%s", diff)
			}
			if tt.stderrHas != "" {
				if !strings.Contains(stderr.String(), tt.stderrHas) {
					t.Errorf("stderr = %q, want it to contain %q", stderr.String(), tt.stderrHas)
				}
			} else if diff := cmp.Diff(tt.stderr, stderr.String()); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRunCheckDefaultFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "gateway.yaml"), []byte(checkValidYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"-offline"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit code %d, stderr: %s", code, stderr.String())
	}
	if want := "gateway.yaml: valid (2 tenants, 2 brokers, 3 routes)\n"; stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
}
