package main

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestServeHalfClosedPollIsServed: osb-gateway serve, on either server,
// answers a poll whose platform half-closed its side after the request
// with the broker's answer (issue 28, item 2: net/http's listener used to
// cancel it and answer an empty 200).
func TestServeHalfClosedPollIsServed(t *testing.T) {
	for _, kind := range []string{config.ServerLean, config.ServerStandard} {
		t.Run(kind, func(t *testing.T) {
			broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.WriteString(w, `{"state":"succeeded"}`)
			}))
			defer broker.Close()
			path := filepath.Join(t.TempDir(), "gateway.yaml")
			writeConfig(t, path, broker.URL, "pw")
			cfg, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Listen.Server = kind
			s, err := newServer(cfg, path, newLogs(cfg.Log, io.Discard))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- s.serve() }()
			waitReady(t, "http://"+s.adminLn.Addr().String())
			defer func() {
				_ = s.shutdown(t.Context())
				<-done
			}()
			c, err := net.Dial("tcp", s.mainLn.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			auth := base64.StdEncoding.EncodeToString([]byte("u:pw"))
			_, _ = io.WriteString(c, "GET /t/b/v2/service_instances/i/last_operation HTTP/1.1\r\nHost: gw\r\nAuthorization: Basic "+auth+
				"\r\nX-Broker-API-Version: 2.14\r\n\r\n")
			_ = c.(*net.TCPConn).CloseWrite()
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != 200 || string(body) != `{"state":"succeeded"}` {
				t.Errorf("half-closed poll: %d %q, want the broker's 200", res.StatusCode, body)
			}
		})
	}
}
