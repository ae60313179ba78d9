package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"golang.org/x/crypto/bcrypt"
)

// subcommands are the commands the top-level help must list, each with
// the arguments that make it print its flags.
var subcommands = []struct {
	name string
	help []string
}{
	{"serve", []string{"serve", "-h"}},
	{"demo", []string{"demo", "-h"}},
	{"check", []string{"check", "-h"}},
	{"health", []string{"health", "-h"}},
	{"hash-password", []string{"hash-password", "-h"}},
	{"audit", []string{"audit", "verify", "-h"}},
	{"audit", []string{"audit", "query", "-h"}},
	{"audit", []string{"audit", "-h"}},
	{"inventory", []string{"inventory", "-h"}},
	{"inventory", []string{"inventory", "export", "-h"}},
	{"inventory", []string{"inventory", "import", "-h"}},
	{"state", []string{"state", "-h"}},
	{"state", []string{"state", "status", "-h"}},
	{"state", []string{"state", "accept-loss", "-h"}},
	{"policy", []string{"policy", "-h"}},
	{"policy", []string{"policy", "test", "-h"}},
	{"schema", []string{"schema", "-h"}},
	{"version", []string{"version", "-h"}},
}

// TestHelpListsSubcommands: -h, --help and help exit 0 and list every
// subcommand (-h used to reach serve's flag set: "Usage of serve", exit 2).
func TestHelpListsSubcommands(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"-help"}, {"help"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != 0 {
			t.Errorf("%v: exit %d, want 0; stderr: %s", args, code, stderr.String())
		}
		for _, c := range subcommands {
			if !strings.Contains(stdout.String(), "\n  "+c.name+" ") {
				t.Errorf("%v: the help does not list %q:\n%s", args, c.name, stdout.String())
			}
		}
		if strings.Contains(stdout.String()+stderr.String(), "Usage of") {
			t.Errorf("%v: a flag set's default usage was printed", args)
		}
	}
}

// TestSubcommandHelpExitsZero: every subcommand's -h prints its usage and
// exits 0 (serve and demo used to exit 2).
func TestSubcommandHelpExitsZero(t *testing.T) {
	for _, c := range subcommands {
		t.Run(strings.Join(c.help, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(c.help, strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Errorf("exit %d, want 0; stderr: %s", code, stderr.String())
			}
			if !strings.Contains(stdout.String()+stderr.String(), "usage: osb-gateway") {
				t.Errorf("no usage printed:\n%s%s", stdout.String(), stderr.String())
			}
		})
	}
}

// TestUsageErrorsExitTwo: an unknown command, flag or argument exits 2.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, args := range [][]string{{"nope"}, {"serve", "-nope"}, {"check", "x.yaml"}, {"health", "-nope"},
		{"hash-password", "-cost", "3"}, {"version", "extra"}, {"demo", "-nope"}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader("pw\n"), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2; stderr: %s", args, code, stderr.String())
		}
	}
}

// TestMissingConfigSameExitCode: a configuration file that cannot be read
// exits 2 from check and from serve (serve used to exit 1).
func TestMissingConfigSameExitCode(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	for _, args := range [][]string{{"check", "-offline", "-config", missing}, {"check", "-config", missing},
		{"serve", "-config", missing}, {"-config", missing}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, exitUsage, stderr.String())
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("nonsense: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "-offline", "-config", bad}, {"serve", "-config", bad}} {
		var stdout, stderr bytes.Buffer
		if code := run(args, strings.NewReader(""), &stdout, &stderr); code != exitFailed {
			t.Errorf("%v: exit %d, want %d; stderr: %s", args, code, exitFailed, stderr.String())
		}
	}
}

// TestVersionFlag: --version prints what version prints (it used to be
// an error).
func TestVersionFlag(t *testing.T) {
	var a, b, stderr bytes.Buffer
	if code := run([]string{"--version"}, nil, &a, &stderr); code != 0 {
		t.Fatalf("--version: exit %d: %s", code, stderr.String())
	}
	if code := run([]string{"version"}, nil, &b, &stderr); code != 0 {
		t.Fatalf("version: exit %d: %s", code, stderr.String())
	}
	if a.String() != b.String() || !strings.HasPrefix(a.String(), "osb-gateway ") {
		t.Errorf("--version printed %q, version %q", a.String(), b.String())
	}
}

// TestVersionPrintsVCSRevision: a binary built in a git checkout prints the
// commit it was built from (version used to print "dev" whatever the
// build).
func TestVersionPrintsVCSRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	head, err := exec.Command("git", "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not in a git checkout: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "osb-gateway")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	info, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(info), "vcs.revision="+strings.TrimSpace(string(head))) {
		t.Skipf("go did not stamp the revision into the binary here (a git worktree?):\n%s", info)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := "revision " + strings.TrimSpace(string(head))
	if !strings.Contains(string(out), want) || !strings.Contains(string(out), "go1.") {
		t.Errorf("version printed %q, want it to contain %q and the Go version", out, want)
	}
}

func TestHashPassword(t *testing.T) {
	for _, tc := range []struct {
		name, stdin string
		args        []string
		code        int
		password    string // the hash printed must match it
		says        string // on stderr
	}{
		{name: "line", stdin: "s3cret-pass\n", args: []string{"-cost", "4"}, password: "s3cret-pass"},
		{name: "no newline", stdin: "s3cret-pass", args: []string{"-cost", "4"}, password: "s3cret-pass"},
		{name: "CRLF", stdin: "s3cret-pass\r\nignored\n", args: []string{"-cost", "4"}, password: "s3cret-pass"},
		{name: "empty", stdin: "", code: 1, says: "no password on standard input"},
		{name: "too long for bcrypt", stdin: strings.Repeat("x", 73), args: []string{"-cost", "4"}, code: 1, says: "at most 72"},
		{name: "cost too high", stdin: "pw", args: []string{"-cost", "32"}, code: 2, says: "-cost 32 is outside 4 to 31"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"hash-password"}, tc.args...), strings.NewReader(tc.stdin), &stdout, &stderr)
			if code != tc.code || !strings.Contains(stderr.String(), tc.says) {
				t.Fatalf("exit %d, want %d; stderr %q, want %q", code, tc.code, stderr.String(), tc.says)
			}
			if tc.password == "" {
				if stdout.Len() != 0 {
					t.Errorf("stdout = %q, want nothing", stdout.String())
				}
				return
			}
			hash := strings.TrimSuffix(stdout.String(), "\n")
			if err := bcrypt.CompareHashAndPassword([]byte(hash), []byte(tc.password)); err != nil {
				t.Errorf("hash %q does not match the password: %v", hash, err)
			}
			if strings.Contains(stdout.String()+stderr.String(), tc.password) {
				t.Errorf("the password was echoed")
			}
		})
	}
}

func TestHealth(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"status":"` + r.URL.Path + `"}` + "\n"))
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	_, port, _ := net.SplitHostPort(addr)
	down := osbtest.DeadAddr(t)
	for _, tc := range []struct {
		name   string
		status int
		args   []string
		code   int
		says   string
	}{
		{"healthy", 200, []string{"-addr", addr}, 0, `{"status":"/healthz"}`},
		{"host left out means loopback", 200, []string{"-addr", ":" + port}, 0, "http://127.0.0.1:" + port + "/healthz"},
		{"unspecified host means loopback", 200, []string{"-addr", "0.0.0.0:" + port}, 0, "http://127.0.0.1:" + port + "/healthz"},
		{"ready", 200, []string{"-addr", addr, "-ready"}, 0, `{"status":"/readyz"}`},
		{"not ready", 503, []string{"-addr", addr, "-ready"}, 1, "answered 503, expected 200"},
		{"nothing listens", 200, []string{"-addr", down}, 1, "connection refused"},
		{"bad address", 200, []string{"-addr", "nope"}, 2, "missing port"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status = tc.status
			var stdout, stderr bytes.Buffer
			code := run(append([]string{"health"}, tc.args...), nil, &stdout, &stderr)
			if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.says) {
				t.Errorf("exit %d, want %d; output %q, want %q", code, tc.code, stdout.String()+stderr.String(), tc.says)
			}
		})
	}
}
