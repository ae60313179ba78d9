package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// brokerProc is a running osb-sample-broker process.
type brokerProc struct {
	t    *testing.T
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed when the process has been waited for
}

// startBroker runs the binary on a port the kernel picks and waits for its
// "serving" log line, which names the address.
func startBroker(t *testing.T, bin string, args ...string) *brokerProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"-addr", "127.0.0.1:0", "-log-format", "json", "-password", "pw"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &brokerProc{t: t, cmd: cmd, done: make(chan struct{})}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "serving" {
				addr <- line.Addr
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	select {
	case a := <-addr:
		p.url = "http://" + a
	case <-p.done:
		t.Fatalf("the broker exited before serving: %v", cmd.ProcessState)
	case <-time.After(30 * time.Second):
		t.Fatal("the broker did not serve within 30s")
	}
	return p
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *brokerProc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM, waits for the graceful shutdown (which lets every
// request finish, its call-log line written) and wants exit status 0.
func (p *brokerProc) stop() {
	p.t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if !p.cmd.ProcessState.Success() {
		p.t.Errorf("the broker ended with %v after SIGTERM", p.cmd.ProcessState)
	}
}

// do sends an OSB request and returns the status and body.
func (p *brokerProc) do(method, path, body string) (int, string) {
	p.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, p.url+path, rd)
	if err != nil {
		p.t.Fatal(err)
	}
	r.SetBasicAuth(samplebroker.DefaultUsername, "pw")
	r.Header.Set("X-Broker-API-Version", "2.17")
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		p.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		p.t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// must sends a request and fails unless the status is want.
func (p *brokerProc) must(method, path, body string, want int) string {
	p.t.Helper()
	status, b := p.do(method, path, body)
	if status != want {
		p.t.Fatalf("%s %s: %d %s, want %d", method, path, status, b, want)
	}
	return b
}

const (
	svc = samplebroker.ServiceID
	// instance paths
	instances = "/v2/service_instances/"
)

func provisionBody(plan string) string {
	return `{"service_id":"` + svc + `","plan_id":"` + plan + `","organization_guid":"o","space_guid":"s"}`
}

// TestCrashRestart provisions, binds, updates and deprovisions through the
// real binary, kills it with SIGKILL, restarts it on the same state file,
// and reads the same answers back; the call log kept every line.
func TestCrashRestart(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "osb-sample-broker")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	state, calls := filepath.Join(dir, "state.jsonl"), filepath.Join(dir, "calls.jsonl")
	args := []string{"-state-file", state, "-call-log", calls, "-async-delay", "1h"}
	sync, async := samplebroker.PlanSyncID, samplebroker.PlanAsyncID
	del := "?service_id=" + svc + "&plan_id=" + sync

	p := startBroker(t, bin, args...)
	p.must("PUT", instances+"s", provisionBody(sync), 201)
	p.must("PUT", instances+"s/service_bindings/k", `{"service_id":"`+svc+`","plan_id":"`+sync+`"}`, 201)
	p.must("PATCH", instances+"s", `{"service_id":"`+svc+`","parameters":{"size":"large"}}`, 200)
	var accepted struct{ Operation string }
	_ = json.Unmarshal([]byte(p.must("PUT", instances+"a?accepts_incomplete=true", provisionBody(async), 202)), &accepted)
	p.must("PUT", instances+"gone", provisionBody(sync), 201)
	p.must("DELETE", instances+"gone"+del, "", 200)
	const mutating = 6

	reads := []string{
		instances + "s", instances + "s/service_bindings/k", instances + "s/last_operation",
		instances + "a/last_operation?operation=" + accepted.Operation, instances + "a", instances + "gone",
		"/_sample/holdings",
	}
	answers := func(p *brokerProc) []string {
		var out []string
		for _, path := range reads {
			status, body := p.do("GET", path, "")
			out = append(out, path+" "+http.StatusText(status)+" "+body)
		}
		return out
	}
	before := answers(p)
	if want := `{"instances":["a","s"],"bindings":["s/k"]}` + "\n"; !strings.HasSuffix(before[len(before)-1], want) {
		t.Fatalf("holdings before the crash: %s, want %s", before[len(before)-1], want)
	}
	p.kill()

	q := startBroker(t, bin, args...)
	if diff := cmp.Diff(before, answers(q)); diff != "" {
		t.Errorf("answers after kill -9 and a restart (-before +after):\n%s", diff)
	}
	body := q.must("PUT", instances+"b?accepts_incomplete=true", provisionBody(async), 202)
	var again struct{ Operation string }
	if err := json.Unmarshal([]byte(body), &again); err != nil || again.Operation == accepted.Operation || again.Operation == "" {
		t.Errorf("operation after the restart %q (%v), want one other than %q", again.Operation, err, accepted.Operation)
	}
	q.stop()

	// The lines of the first process survived its SIGKILL: each was
	// written before its response left (the handler writes it before it
	// returns, and net/http sends a small answer only then).
	data, err := os.ReadFile(calls)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != mutating+1 {
		t.Fatalf("call log has %d lines, want %d:\n%s", len(lines), mutating+1, data)
	}
	var last samplebroker.CallRecord
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	want := samplebroker.CallRecord{Endpoint: samplebroker.EndpointProvision, InstanceID: "b", Status: 202,
		Async: true, Operation: again.Operation, InFlight: []samplebroker.CallFlight{}}
	last.Start, last.End = time.Time{}, time.Time{}
	if diff := cmp.Diff(want, last); diff != "" {
		t.Errorf("last call-log line (-want +got):\n%s", diff)
	}
}
