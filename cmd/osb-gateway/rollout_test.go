package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// rolloutConfig: a shutdown_delay far longer than the test, so that only
// the test's second SIGTERM ends it (no assumption about how fast anything
// runs), and a generous grace.
const rolloutConfig = `
listen: {address: "LISTEN", shutdown_delay: 10m, shutdown_grace: 1m}
state: {backend: memory}
admin: {address: "ADMIN"}
log: {format: json, level: info}
reload: {watch: false}
brokers:
  - name: b
    url: BROKER_URL
tenants:
  - name: t
    credentials: [{username: u, password: a-long-enough-password}]
    routes: [{broker: b}]
`

// rolloutLoad is an open-loop load and the load balancer in front of the
// gateway: requests go out at a fixed pace whatever the answers, while
// the balancer's health check (GET /readyz) says the gateway is in
// rotation; each request is counted as answered 200 or failed.
type rolloutLoad struct {
	t          *testing.T
	base       string
	client     *http.Client
	inRotation atomic.Bool
	wg         sync.WaitGroup
	sent, ok   atomic.Int64
	mu         sync.Mutex
	failures   []string
}

func (l *rolloutLoad) send() {
	l.sent.Add(1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		req, _ := http.NewRequest("GET", l.base+"/t/b/v2/service_instances/i/last_operation", nil)
		req.SetBasicAuth("u", "a-long-enough-password")
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := l.client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == 200 {
				l.ok.Add(1)
				return
			}
			err = fmt.Errorf("status %d", res.StatusCode)
		}
		l.mu.Lock()
		l.failures = append(l.failures, err.Error())
		l.mu.Unlock()
	}()
}

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRolloutZeroDrop runs the binary under open-loop load, as a rollout
// does: SIGTERM turns /readyz 503 at once, every request sent until the
// load balancer noticed, and after (a client with a stale endpoint), is
// answered; once the delay ends (here: a second SIGTERM), the listener
// closes, a request in flight finishes, and the process exits 0. No
// request fails. (The gateway used to stop accepting at the first SIGTERM:
// a request sent during the drain got connection refused.)
func TestRolloutZeroDrop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	entered, release := make(chan struct{}, 1), make(chan struct{})
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("held") != "" {
			entered <- struct{}{}
			<-release
		}
		_, _ = io.WriteString(w, `{"state":"in progress"}`)
	}))
	defer broker.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	listen, admin := osbtest.FreeAddr(t), osbtest.FreeAddr(t)
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	y := strings.NewReplacer("LISTEN", listen, "ADMIN", admin, "BROKER_URL", broker.URL).Replace(rolloutConfig)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	proc, exited := startServe(t, osbtest.GatewayBinary(t), path)
	waitReady(t, "http://"+admin)

	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	defer tr.CloseIdleConnections()
	l := &rolloutLoad{t: t, base: "http://" + listen, client: &http.Client{Transport: tr, Timeout: time.Minute}}
	l.inRotation.Store(true)
	removed, stopLoad, loadDone := make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() { // the load balancer's health check
		for {
			res, err := http.Get("http://" + admin + "/readyz")
			if err == nil {
				res.Body.Close()
			}
			if err != nil || res.StatusCode != 200 {
				l.inRotation.Store(false)
				close(removed)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() { // the platform: one request every 2ms while in rotation
		defer close(loadDone)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopLoad:
				return
			case <-tick.C:
				if l.inRotation.Load() {
					l.send()
				}
			}
		}
	}()
	waitFor(t, "100 requests were answered", func() bool { return l.ok.Load() >= 100 })

	held := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest("GET", l.base+"/t/b/v2/service_instances/i/last_operation?held=1", nil)
		req.SetBasicAuth("u", "a-long-enough-password")
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			held <- 0
			return
		}
		res.Body.Close()
		held <- res.StatusCode
	}()
	<-entered

	_ = proc.Signal(syscall.SIGTERM)
	select {
	case <-removed:
	case <-time.After(30 * time.Second):
		t.Fatal("/readyz never stopped answering 200 after SIGTERM")
	}
	for range 20 { // clients whose endpoint list is not updated yet
		l.send()
	}
	close(stopLoad)
	<-loadDone
	l.wg.Wait()

	_ = proc.Signal(syscall.SIGTERM) // the delay's end, early
	waitFor(t, "the listener closed", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	close(release)
	if code := <-held; code != 200 {
		t.Errorf("the request in flight at the drain got %d, want 200", code)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("exit after the drain: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the gateway did not exit after the drain")
	}
	if len(l.failures) > 0 {
		t.Errorf("%d of %d requests failed, want 0; first: %s", len(l.failures), l.sent.Load(), l.failures[0])
	}
}
