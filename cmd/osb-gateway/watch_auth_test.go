package main

import (
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestWatchReloadsBrokerNextPassword: brokers[].next_password_file is
// watched; a broker rotated to a password the gateway holds as the next one
// is followed at once, and one rotated to a third password is followed
// once the next_password_file holds it, without a signal.
func TestWatchReloadsBrokerNextPassword(t *testing.T) {
	var accept atomic.Value
	set := func(pass string) { accept.Store("Basic " + base64.StdEncoding.EncodeToString([]byte("gw:"+pass))) }
	set("first")
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != accept.Load().(string) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{}`)
			return
		}
		_, _ = io.WriteString(w, `{"state":"succeeded"}`)
	}))
	defer broker.Close()
	dir := t.TempDir()
	next := filepath.Join(dir, "next")
	if err := os.WriteFile(next, []byte("second\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("BROKER_URL", broker.URL+"\n    username: gw\n    password: first\n    next_password_file: "+next,
		"password_file: PASSWORD_FILE", "password: platform-pass").Replace(watchConfig)
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, path)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.watch(ctx); err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.mainLn.Addr().String()
	ok := func() bool { code, _ := poll(t, base, "platform-pass"); return code == 200 }
	if !ok() {
		t.Fatal("the first password is refused")
	}
	set("second")
	if code, body := poll(t, base, "platform-pass"); code != 200 {
		t.Fatalf("after the broker moved to the next password: %d %s", code, body)
	}
	if m := scrapeMetrics(t, s); !strings.Contains(m, `osb_gateway_broker_credential{broker="b",which="next"} 1`) {
		t.Errorf("the gauge does not show the next credential in use:\n%s", m)
	}
	set("third")
	if code, body := poll(t, base, "platform-pass"); code != 502 || !strings.Contains(body, "refused both credentials") {
		t.Errorf("with neither password: %d %s, want 502 saying both were refused", code, body)
	}
	writeAtomic(t, next, "third\n")
	waitFor(t, "the new next_password_file is applied", ok)
}
