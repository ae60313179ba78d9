package deploytest

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestReleaseImageStarts builds the released image's Dockerfile
// (deploy/release.Dockerfile) with podman, offline: a local base made FROM
// scratch with the host's CA bundle and a nonroot user stands for
// distroless static, and the binary is built here as GoReleaser builds it.
// Then it runs the image's entrypoint and command as the image says (its
// user, working directory, volume) with the OCI runtime runc, on the host's
// network, and asks the admin listener for /healthz, with an HTTP client
// and with the image's HEALTHCHECK command inside the container; SIGTERM
// stops it.
//
// podman run itself cannot start containers on machines that forbid setting
// another process's rlimits (this project's sandbox): the test runs the
// exported image with runc and no rlimits instead. It needs root, podman
// and runc: set OSB_GATEWAY_TEST_IMAGE=1.
func TestReleaseImageStarts(t *testing.T) {
	if os.Getenv("OSB_GATEWAY_TEST_IMAGE") != "1" {
		t.Skip("set OSB_GATEWAY_TEST_IMAGE=1 (root, podman and runc) to build and start the image")
	}
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
	}
	root, _ := filepath.Abs("../..")
	tmp := t.TempDir()
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	tag := fmt.Sprintf("%d", time.Now().UnixNano())

	// The base: scratch, CA certificates, the nonroot user and its home.
	base := filepath.Join(tmp, "base")
	must(t, os.MkdirAll(filepath.Join(base, "home-nonroot"), 0o755))
	ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	must(t, err)
	must(t, os.WriteFile(filepath.Join(base, "ca-certificates.crt"), ca, 0o644))
	must(t, os.WriteFile(filepath.Join(base, "passwd"), []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"), 0o644))
	must(t, os.WriteFile(filepath.Join(base, "Containerfile"), []byte("FROM scratch\n"+
		"COPY ca-certificates.crt /etc/ssl/certs/ca-certificates.crt\nCOPY passwd /etc/passwd\n"+
		"COPY --chown=65532:65532 home-nonroot /home/nonroot\n"), 0o644))
	baseImage := "localhost/osb-gateway-testbase:" + tag
	run(base, "podman", "build", "--pull=never", "--network", "host", "-t", baseImage, ".")
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", baseImage).Run() })

	// The context GoReleaser's dockers_v2 gives: <os>/<arch>/osb-gateway.
	ctx := filepath.Join(tmp, "ctx")
	bin := filepath.Join(ctx, "linux", runtime.GOARCH, "osb-gateway")
	build := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version=v0.0.0-imagetest", "-o", bin, "./cmd/osb-gateway")
	build.Dir = root
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	img := "localhost/osb-gateway:imagetest-" + tag
	run(ctx, "podman", "build", "--format", "docker", "--pull=never", "--network", "host", "-f", filepath.Join(root, "deploy/release.Dockerfile"),
		"--build-arg", "RUNTIME_IMAGE="+baseImage, "--build-arg", "TARGETPLATFORM=linux/"+runtime.GOARCH, "-t", img, ".")
	t.Cleanup(func() { exec.Command("podman", "rmi", "-f", img).Run() })

	var inspect []struct {
		Config struct {
			User, WorkingDir string
			Entrypoint, Cmd  []string
			Env              []string
			Volumes          map[string]any
			StopSignal       string
		}
	}
	must(t, json.Unmarshal([]byte(run(tmp, "podman", "image", "inspect", img)), &inspect))
	cfg := inspect[0].Config
	if cfg.User != "65532:65532" || cfg.Volumes["/var/lib/osb-gateway"] == nil {
		t.Errorf("image config: user %q, volumes %v", cfg.User, cfg.Volumes)
	}
	// HEALTHCHECK is Docker's image format only (the build asks for it).
	hc := run(tmp, "podman", "image", "inspect", "--format", "{{json .HealthCheck}}", img)
	if !strings.Contains(hc, `"/usr/local/bin/osb-gateway","health"`) {
		t.Errorf("image health check %s", hc)
	}

	// The rootfs, and a bundle that runs it as the image says.
	bundle := filepath.Join(tmp, "bundle")
	rootfs := filepath.Join(bundle, "rootfs")
	must(t, os.MkdirAll(rootfs, 0o755))
	cid := strings.TrimSpace(run(tmp, "podman", "create", img))
	t.Cleanup(func() { exec.Command("podman", "rm", "-f", cid).Run() })
	tarFile := filepath.Join(tmp, "rootfs.tar")
	run(tmp, "podman", "export", "-o", tarFile, cid)
	run(tmp, "tar", "-C", rootfs, "-xf", tarFile)

	listen, admin := freePort(t), freePort(t)
	etc := filepath.Join(tmp, "etc")
	state := filepath.Join(tmp, "state")
	must(t, os.MkdirAll(etc, 0o755))
	must(t, os.MkdirAll(state, 0o755))
	must(t, os.Chown(state, 65532, 65532))
	must(t, os.WriteFile(filepath.Join(etc, "gateway.yaml"), []byte(fmt.Sprintf(`
listen: {address: "127.0.0.1:%d", shutdown_delay: 0s, shutdown_grace: 5s}
admin: {address: "127.0.0.1:%d"}
state: {backend: bolt, path: /var/lib/osb-gateway/osb-gateway.db}
brokers: [{name: sample, url: "http://127.0.0.1:1"}]
tenants: [{name: cf, credentials: [{username: cf, password: image-test-password}], routes: [{broker: sample}]}]
`, listen, admin)), 0o644))

	run(bundle, "runc", "spec")
	spec := map[string]any{}
	raw, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	must(t, err)
	must(t, json.Unmarshal(raw, &spec))
	proc := spec["process"].(map[string]any)
	delete(proc, "rlimits")
	proc["terminal"] = false
	proc["args"] = append(append([]string{}, cfg.Entrypoint...), cfg.Cmd...)
	proc["cwd"] = cfg.WorkingDir
	proc["env"] = append([]string{"PATH=/usr/local/bin"}, cfg.Env...)
	proc["user"] = map[string]any{"uid": 65532, "gid": 65532}
	spec["root"] = map[string]any{"path": "rootfs", "readonly": true}
	spec["mounts"] = append(spec["mounts"].([]any),
		map[string]any{"destination": "/etc/osb-gateway", "type": "bind", "source": etc, "options": []string{"rbind", "ro"}},
		map[string]any{"destination": "/var/lib/osb-gateway", "type": "bind", "source": state, "options": []string{"rbind", "rw"}})
	linux := spec["linux"].(map[string]any)
	delete(linux, "resources")
	var ns []any
	for _, n := range linux["namespaces"].([]any) {
		if typ := n.(map[string]any)["type"]; typ != "network" && typ != "cgroup" {
			ns = append(ns, n) // the host's network: no registry, no bridge needed
		}
	}
	linux["namespaces"] = ns
	out, err := json.Marshal(spec)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(bundle, "config.json"), out, 0o644))

	id := "osb-gateway-imagetest-" + tag
	logFile, err := os.Create(filepath.Join(tmp, "container.log"))
	must(t, err)
	ctr := exec.Command("runc", "run", id)
	ctr.Dir = bundle
	ctr.Stdout, ctr.Stderr = logFile, logFile
	must(t, ctr.Start())
	done := make(chan error, 1)
	go func() { done <- ctr.Wait() }()
	t.Cleanup(func() {
		exec.Command("runc", "kill", id, "KILL").Run()
		exec.Command("runc", "delete", "-f", id).Run()
	})
	logs := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }

	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", admin))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case err := <-done:
			t.Fatalf("the container exited (%v) before /healthz answered:\n%s", err, logs())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 200 from /healthz on the admin listener within 30s:\n%s", logs())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The image's HEALTHCHECK command, inside the container, at the admin
	// address this config gives.
	hcOut, err := exec.Command("runc", "exec", "--user", "65532:65532", id,
		"/usr/local/bin/osb-gateway", "health", "-addr", fmt.Sprintf("127.0.0.1:%d", admin)).CombinedOutput()
	if err != nil {
		t.Errorf("health inside the container: %v\n%s", err, hcOut)
	}
	if _, err := os.Stat(filepath.Join(state, "osb-gateway.db")); err != nil {
		t.Errorf("no bolt file on the state volume: %v", err)
	}
	run(tmp, "runc", "kill", id, "TERM")
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("after SIGTERM: %v\n%s", err, logs())
		}
	case <-time.After(20 * time.Second):
		t.Errorf("still running 20s after SIGTERM:\n%s", logs())
	}
	t.Logf("image %s: /healthz 200, health command %q, state on the volume, SIGTERM exit 0", img, strings.TrimSpace(string(hcOut)))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
