package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

const unitPath = "../../deploy/systemd/osb-gateway.service"

// unit is a parsed systemd unit file: section → key → values in order.
type unit map[string]map[string][]string

// readUnit parses the subset of the unit file syntax the shipped unit
// uses: sections, Key=Value lines, comments, backslash continuations.
func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u, section, pending := unit{}, "", ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if pending != "" {
			line, pending = pending+" "+line, ""
		}
		if strings.HasSuffix(line, "\\") {
			pending = strings.TrimSuffix(line, "\\")
			continue
		}
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: cannot read %q", path, line)
			}
			u[section][strings.TrimSpace(k)] = append(u[section][strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// last is the value of a Service key that counts (the last one), or def.
func (u unit) last(key, def string) string {
	if v := u["Service"][key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// TestSystemdUnitVerifies: systemd-analyze verify finds nothing to say
// about the unit (its warnings exit 0, so any output fails the test). The
// binary the unit runs is replaced by one built here, since verify checks
// that it exists.
func TestSystemdUnitVerifies(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (.ci/run installs systemd on Debian)")
	}
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyUnit := filepath.Join(dir, "osb-gateway.service")
	if err := os.WriteFile(copyUnit, bytes.ReplaceAll(raw, []byte("/usr/local/bin/osb-gateway"), []byte(osbtest.GatewayBinary(t))), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", "--man=no", copyUnit).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// unitHost runs the unit's commands the way systemd would on a host whose
// root directory is root: as an unprivileged user standing in for
// DynamicUser (nobody, when the test runs as root), in WorkingDirectory=
// (the root directory when unset, as systemd does), with StateDirectory=
// and LogsDirectory= created and owned by that user, the rest of the tree
// owned by root and read only to the user (as ProtectSystem=strict leaves
// it), and AmbientCapabilities=, CapabilityBoundingSet= and
// NoNewPrivileges= applied with setpriv.
type unitHost struct {
	t        *testing.T
	u        unit
	root     string
	uid, gid int // -1: the test's own user
}

func newUnitHost(t *testing.T, u unit) *unitHost {
	t.Helper()
	root, err := os.MkdirTemp("", "osb-gateway-unit-root")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	if err := os.Chmod(root, 0o755); err != nil { // MkdirTemp makes it 0700
		t.Fatal(err)
	}
	h := &unitHost{t: t, u: u, root: root, uid: -1, gid: -1}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("setpriv"); err != nil {
			t.Skip("running as root without setpriv (util-linux) to drop to an unprivileged user")
		}
		h.uid, h.gid = 65534, 65534 // nobody, for the dynamic user
	}
	for key, base := range map[string]string{"StateDirectory": "/var/lib", "LogsDirectory": "/var/log"} {
		for _, name := range u["Service"][key] {
			dir := h.path(filepath.Join(base, name))
			mode := os.FileMode(0o755)
			if m := u.last(key+"Mode", ""); m != "" {
				if _, err := fmt.Sscanf(m, "%o", &mode); err != nil {
					t.Fatalf("%sMode=%s: %v", key, m, err)
				}
			}
			h.mkdir(dir, mode, true)
		}
	}
	return h
}

// expand replaces the specifiers the unit may use.
func (h *unitHost) expand(s string) string {
	r := strings.NewReplacer("%S", "/var/lib", "%L", "/var/log", "%C", "/var/cache", "%%", "%")
	s = r.Replace(s)
	if strings.Contains(s, "%") && !strings.Contains(s, "$") {
		h.t.Fatalf("unit value %q has a specifier this test does not know", s)
	}
	return s
}

// path is where the unit's absolute path p lies under the test's root.
func (h *unitHost) path(p string) string { return filepath.Join(h.root, h.expand(p)) }

// mkdir makes dir and its parents (0755, root's); dir itself gets mode and,
// when owned, the unit's user.
func (h *unitHost) mkdir(dir string, mode os.FileMode, owned bool) {
	h.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		h.t.Fatal(err)
	}
	if owned && h.uid >= 0 {
		if err := os.Chown(dir, h.uid, h.gid); err != nil {
			h.t.Fatal(err)
		}
	}
}

// install copies data to the unit's path p, root's, with mode.
func (h *unitHost) install(p string, data []byte, mode os.FileMode) {
	h.t.Helper()
	dst := h.path(p)
	h.mkdir(filepath.Dir(dst), 0o755, false)
	if err := os.WriteFile(dst, data, mode); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Chmod(dst, mode); err != nil {
		h.t.Fatal(err)
	}
}

// command is the unit's Exec line as it would run.
func (h *unitHost) command(line string) *exec.Cmd {
	h.t.Helper()
	args := strings.Fields(h.expand(line))
	args[0] = strings.TrimLeft(args[0], "-@:+!")
	for i, a := range args {
		if filepath.IsAbs(a) {
			args[i] = h.path(a)
		}
	}
	if h.uid >= 0 {
		priv := []string{fmt.Sprintf("--reuid=%d", h.uid), fmt.Sprintf("--regid=%d", h.gid), "--clear-groups"}
		if caps := capList(h.u.last("AmbientCapabilities", "")); caps != "" {
			priv = append(priv, "--inh-caps="+caps, "--ambient-caps="+caps)
		}
		if caps := capList(h.u.last("CapabilityBoundingSet", "")); caps != "" {
			priv = append(priv, "--bounding-set=-all,"+caps)
		}
		if h.u.last("NoNewPrivileges", "no") == "yes" {
			priv = append(priv, "--no-new-privs")
		}
		args = append(append(append([]string{"setpriv"}, priv...), "--"), args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = h.path(h.u.last("WorkingDirectory", "/"))
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"}
	for key, env := range map[string]string{"StateDirectory": "STATE_DIRECTORY", "LogsDirectory": "LOGS_DIRECTORY"} {
		if name := h.u.last(key, ""); name != "" {
			base := map[string]string{"StateDirectory": "/var/lib", "LogsDirectory": "/var/log"}[key]
			cmd.Env = append(cmd.Env, env+"="+h.path(filepath.Join(base, name)))
		}
	}
	return cmd
}

// capList turns "CAP_NET_BIND_SERVICE CAP_X" into setpriv's "+net_bind_service,+x".
func capList(v string) string {
	var out []string
	for _, c := range strings.Fields(v) {
		out = append(out, "+"+strings.ToLower(strings.TrimPrefix(c, "CAP_")))
	}
	return strings.Join(out, ",")
}

// start runs ExecStartPre (which must succeed) and then ExecStart, and
// waits until the admin listener says ready.
func (h *unitHost) start(adminAddr string) *gatewayProcess {
	h.t.Helper()
	for _, pre := range h.u["Service"]["ExecStartPre"] {
		if out, err := h.command(pre).CombinedOutput(); err != nil {
			h.t.Fatalf("ExecStartPre=%s: %v\n%s", pre, err, out)
		}
	}
	p := &gatewayProcess{cmd: h.command(h.u.last("ExecStart", "")), logs: &bytes.Buffer{}, done: make(chan error, 1)}
	p.cmd.Stderr = p.logs
	if err := p.cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	h.t.Cleanup(func() { _ = p.cmd.Process.Kill() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-p.done:
			h.t.Fatalf("ExecStart exited: %v\n%s", err, p.logs.String())
		default:
		}
		if res, err := http.Get("http://" + adminAddr + "/readyz"); err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return p
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("the gateway never became ready:\n%s", p.logs.String())
	return nil
}

// lowPort finds a free loopback port below 1024 (only root can tell) and
// keeps it for the test: an exclusive lock on a file named after the port,
// held until the test ends, so that test processes running at once (the
// README's test command twice) never pick the same port. A free port
// alone was not enough: two processes both saw 1023 free, and the second
// gateway to bind it failed.
func lowPort(t *testing.T) string {
	t.Helper()
	for p := 1023; p >= 900; p-- {
		lock, err := os.OpenFile(filepath.Join(os.TempDir(), fmt.Sprintf("osb-gateway-test-port-%d.lock", p)), os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close() // another test process holds this port
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			lock.Close()
			continue
		}
		ln.Close()
		t.Cleanup(func() { lock.Close() }) // closing releases the lock
		return addr
	}
	t.Skip("no free port below 1024 on loopback")
	return ""
}

// TestSystemdUnitRunsShippedConfig installs the binary, the shipped
// gateway.yaml and the unit's directories as the unit's comments say, and
// runs ExecStartPre and ExecStart as the unit would: the gateway starts,
// binds a port below 1024 (docs/deploying.md's ":443") as an unprivileged user,
// keeps its bolt file in StateDirectory=, and an async provision still
// blocks an update after a restart. (The unit used to start in "/", where
// the dynamic user cannot create osb-gateway.db, and could not bind :443.)
func TestSystemdUnitRunsShippedConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary")
	}
	u := readUnit(t, unitPath)
	h := newUnitHost(t, u)
	bin, err := os.ReadFile(osbtest.GatewayBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	h.install("/usr/local/bin/osb-gateway", bin, 0o755)

	sample := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Hour}))
	defer sample.Close()
	legacy := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", Legacy: true}))
	defer legacy.Close()
	listen, admin := osbtest.FreeAddr(t), osbtest.FreeAddr(t)
	if h.uid >= 0 {
		listen = lowPort(t) // needs AmbientCapabilities=CAP_NET_BIND_SERVICE as the unprivileged user
	}
	shipped, err := os.ReadFile("../../gateway.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer(`"127.0.0.1:8080"`, fmt.Sprintf("%q", listen), `"127.0.0.1:9090"`, fmt.Sprintf("%q", admin),
		"http://127.0.0.1:8181", sample.URL, "http://127.0.0.1:8182", legacy.URL).Replace(string(shipped))
	cfg = installEdits(t, cfg)
	cfg = strings.ReplaceAll(cfg, " /var/lib/", " "+h.path("/var/lib")+"/") // the host's root is the test's directory
	h.install("/etc/osb-gateway/gateway.yaml", []byte(cfg), 0o644)

	call := func(method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+listen+"/cf-prod/sample"+path, strings.NewReader(body))
		req.SetBasicAuth("cf-prod", "prod-secret")
		req.Header.Set("X-Broker-API-Version", "2.15")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	first := h.start(admin)
	if code, body := call("PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvisionBody); code != 202 {
		t.Fatalf("provision: %d %s\n%s", code, body, first.logs.String())
	}
	stopUnit(t, first)
	second := h.start(admin)
	if code, body := call("PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody); code != 400 || body != inProgress {
		t.Errorf("update after the restart: %d %s\n%s", code, body, second.logs.String())
	}
	stopUnit(t, second)
	states := u["Service"]["StateDirectory"]
	if len(states) == 0 {
		t.Fatal("the unit has no StateDirectory=")
	}
	if _, err := os.Stat(h.path(filepath.Join("/var/lib", states[0], "osb-gateway.db"))); err != nil {
		t.Errorf("the bolt file is not in StateDirectory=: %v", err)
	}
}

// stopUnit sends SIGTERM, as systemctl stop does, and expects exit 0.
func stopUnit(t *testing.T, p *gatewayProcess) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("the gateway exited with %v after SIGTERM:\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the gateway did not stop")
	}
}

// installEdits applies to cfg the edits of gateway.yaml that the unit's
// install comment tells (sed -i 's|A|B|' /etc/osb-gateway/gateway.yaml:
// state.path into StateDirectory=, since a relative one is relative to the
// read-only /etc/osb-gateway), failing when one no longer matches the
// shipped file.
func installEdits(t *testing.T, cfg string) string {
	t.Helper()
	raw, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`sed -i 's\|\^([^|]*)\|([^|]*)\|' /etc/osb-gateway/gateway\.yaml`)
	edits := re.FindAllStringSubmatch(string(raw), -1)
	if len(edits) == 0 {
		t.Fatal("the unit's install comment no longer edits gateway.yaml's state.path")
	}
	for _, e := range edits {
		line := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(e[1]))
		if !line.MatchString(cfg) {
			t.Fatalf("the unit's sed %q matches no line of the shipped gateway.yaml", e[1])
		}
		cfg = line.ReplaceAllLiteralString(cfg, e[2])
	}
	return cfg
}
