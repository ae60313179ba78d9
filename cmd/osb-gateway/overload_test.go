package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReadinessReportsOverload: with listen.max_in_flight 1 and one call
// held at the broker, /readyz answers 503 saying the gateway is
// overloaded, and a second call is shed at once; when the call is
// answered, the gateway is ready again.
func TestReadinessReportsOverload(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	unblock := func() { once.Do(func() { close(release) }) }
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case entered <- struct{}{}:
		case <-release:
		}
		<-release
		_, _ = io.WriteString(w, `{"state":"succeeded"}`)
	}))
	defer broker.Close()
	defer unblock()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	writeConfig(t, path, broker.URL, "pw")
	withCap(t, path)
	s := startServer(t, path)
	base, admin := "http://"+s.mainLn.Addr().String(), "http://"+s.adminLn.Addr().String()

	got := make(chan int, 1)
	go func() {
		c, _ := poll(t, base, "pw")
		got <- c
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the broker")
	}
	res, err := http.Get(admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 503 || !strings.Contains(string(body), "overloaded: 1 platform calls in flight, listen.max_in_flight is 1") {
		t.Errorf("readyz with the cap reached: %d %s", res.StatusCode, body)
	}
	if code, body := poll(t, base, "pw"); code != 503 {
		t.Errorf("a read over the cap: %d %s", code, body)
	}
	unblock()
	if c := <-got; c != 200 {
		t.Errorf("the held call: %d", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for s.readiness() != nil {
		if ctx.Err() != nil {
			t.Fatalf("not ready after the load: %v", s.readiness())
		}
		time.Sleep(time.Millisecond)
	}
}

// withCap sets listen.max_in_flight 1 in the configuration at path.
func withCap(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	capped := strings.Replace(string(b), "shutdown_grace: 5s", "shutdown_grace: 5s, max_in_flight: 1", 1)
	if err := os.WriteFile(path, []byte(capped), 0o600); err != nil {
		t.Fatal(err)
	}
}
