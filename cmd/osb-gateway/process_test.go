package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	osbtest.RemoveBuilt() // the binary the process tests built
	os.Exit(code)
}

// startServe runs `bin serve -config path` as a child process: the
// process, and a channel that receives its exit. The process is killed
// when the test ends, and its log shown if the test failed.
func startServe(t *testing.T, bin, path string) (*os.Process, <-chan error) {
	t.Helper()
	var logs bytes.Buffer
	cmd := exec.Command(bin, "serve", "-config", path)
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited, done := make(chan error, 1), make(chan struct{})
	go func() {
		exited <- cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done // logs is written no more
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return cmd.Process, exited
}

// TestProcessSignals runs the real binary: SIGHUP reloads the file, SIGTERM
// drains a request in flight and exits 0.
func TestProcessSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	dir := t.TempDir()
	bin := osbtest.GatewayBinary(t)
	entered := make(chan struct{}, 1)
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			entered <- struct{}{}
			time.Sleep(500 * time.Millisecond)
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer broker.Close()

	listen, admin := osbtest.FreeAddr(t), osbtest.FreeAddr(t)
	path := filepath.Join(dir, "gateway.yaml")
	write := func(pass string) {
		y := strings.NewReplacer("BROKER_URL", broker.URL, "TENANT_PASS", pass,
			`"127.0.0.1:0", shutdown_grace`, `"`+listen+`", shutdown_grace`, `{address: "127.0.0.1:0"}`, `{address: "`+admin+`"}`).Replace(serveConfig)
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first")
	proc, exited := startServe(t, bin, path)
	waitReady(t, "http://"+admin)
	base := "http://" + listen

	if code, _ := poll(t, base, "first"); code != 200 {
		t.Fatalf("before SIGHUP: %d", code)
	}
	write("second")
	_ = proc.Signal(syscall.SIGHUP)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if code, _ := poll(t, base, "second"); code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("SIGHUP did not reload the configuration")
		}
		time.Sleep(20 * time.Millisecond)
	}

	got := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", base+"/t/b/v2/service_instances/i/last_operation?slow=1", nil)
		req.SetBasicAuth("u", "second")
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- 0
			return
		}
		res.Body.Close()
		got <- res.StatusCode
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the slow request never reached the broker")
	}
	_ = proc.Signal(syscall.SIGTERM)
	if code := <-got; code != 200 {
		t.Errorf("request in flight at SIGTERM got %d", code)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the gateway did not exit after SIGTERM")
	}
}
