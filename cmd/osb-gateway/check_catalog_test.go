package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// TestCheckLintsCatalogs: check fetches each broker's catalog with the
// broker's credentials and prints every finding with its JSON path and
// severity; errors (and an unreachable broker) fail it.
func TestCheckLintsCatalogs(t *testing.T) {
	good := httptest.NewServer(samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret"}))
	defer good.Close()
	bad := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, `{"services":[{"id":"s1","name":"Bad Name","description":"d","bindable":true,"plans":[]}]}`)
	}))
	defer bad.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := "http://" + ln.Addr().String()
	ln.Close()

	write := func(t *testing.T, brokers string) string {
		path := filepath.Join(t.TempDir(), "gateway.yaml")
		y := fmt.Sprintf("brokers: %s\ntenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]\n", brokers)
		if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		name, brokers string
		code          int
		says          string
	}{
		{"sample broker", fmt.Sprintf(`[{name: b, url: %q, username: sample, password: sample-secret}]`, good.URL), 0, `broker "b": catalog at 2.15 fetched, 0 findings`},
		{"wrong credentials", fmt.Sprintf(`[{name: b, url: %q, username: sample, password: nope}]`, good.URL), 1, "status 401"},
		{"bad catalog", fmt.Sprintf(`[{name: b, url: %q}]`, bad.URL), 1, `broker "b" catalog: services[0].plans: error:`},
		{"unreachable", fmt.Sprintf(`[{name: b, url: %q}]`, down), 1, "could not be reached: it refused the connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := runCheck([]string{"-config", write(t, tc.brokers)}, &stdout, &stderr)
			out := stdout.String() + stderr.String()
			if code != tc.code || !strings.Contains(out, tc.says) {
				t.Errorf("exit %d, want %d; output lacks %q:\n%s", code, tc.code, tc.says, out)
			}
		})
	}
}

// TestCheckUnreachableSaysCauseOnce: an unreachable broker is one line
// naming the cause once (it used to repeat the cause after the catalog
// cache's 503 text, with a next-fetch time meaningless to check).
func TestCheckUnreachableSaysCauseOnce(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	down := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "gateway.yaml")
	y := fmt.Sprintf("brokers: [{name: b, url: \"http://%s\"}]\ntenants: [{name: t, credentials: [{username: u, password: a-long-platform-secret}], routes: [{broker: b}]}]\n", down)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"-config", path}, &stdout, &stderr); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	want := path + `: broker "b": catalog not fetched: the broker could not be reached: it refused the connection: dial tcp ` + down + ": connect: connection refused\n" +
		path + ": 1 error in the brokers' catalogs\n"
	if stderr.String() != want {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), want)
	}
}
