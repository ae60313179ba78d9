package proxy

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// TestBrokerTransportSetting: brokers[].transport picks the broker's
// transport; lean is the default.
func TestBrokerTransportSetting(t *testing.T) {
	for _, tc := range []struct {
		setting string
		want    string
	}{{"", "*lean.Transport"}, {"transport: standard", "*http.Transport"}, {"transport: lean", "*lean.Transport"}} {
		cfg, err := config.Parse([]byte(`
admin: {address: "off"}
brokers: [{name: b, url: "http://127.0.0.1:1", `+tc.setting+`}]
tenants: [{name: t, credentials: [{username: u, password: p}], routes: [{broker: b}]}]
`), config.Options{})
		if err != nil {
			t.Fatalf("%q: %v", tc.setting, err)
		}
		u, err := upstream.New(&cfg.Brokers[0], slog.New(slog.DiscardHandler), nil, nil, "", features)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch u.Transport.(type) {
		case *http.Transport:
			got = "*http.Transport"
		case *lean.Transport:
			got = "*lean.Transport"
		}
		if got != tc.want {
			t.Errorf("%q: transport %s, want %s", tc.setting, got, tc.want)
		}
	}
}

// TestBrokerFaultsOnEachTransport: what the platform gets from a broker
// that misbehaves on the wire is the same on both transports.
func TestBrokerFaultsOnEachTransport(t *testing.T) {
	tests := []struct {
		name   string
		answer func(c net.Conn)
		status int
		desc   string
	}{
		{"closes mid-answer", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"state\":")
		}, http.StatusBadGateway, `broker "b" answered 200 but its body was cut short`},
		{"closes before answering", func(net.Conn) {}, http.StatusBadGateway, `broker "b" failed or answered with something that is not HTTP`},
		{"slowloris header", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n")
			_, _ = c.Read(make([]byte, 1)) // until the gateway hangs up
		}, http.StatusGatewayTimeout, `broker "b" did not answer in time (response headers are due within 200ms, the whole call within 5s)`},
		{"chunked", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n9\r\n{\"state\":\r\ne\r\n\"in progress\"}\r\n0\r\n\r\n")
		}, http.StatusOK, ""},
		{"close-delimited", func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n{\"state\":\"in progress\"}")
		}, http.StatusOK, ""},
	}
	for _, kind := range []string{config.TransportStandard, config.TransportLean} {
		for _, tc := range tests {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				url := rawBroker(t, tc.answer)
				cfg, err := config.Parse([]byte(`
admin: {address: "off"}
brokers: [{name: b, url: "`+url+`", timeout: 5s, response_header_timeout: 200ms, validation: {without_catalog: forward}}]
tenants: [{name: t, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{})
				if err != nil {
					t.Fatal(err)
				}
				g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), BrokerTransport: kind})
				if err != nil {
					t.Fatal(err)
				}
				gw := httptest.NewServer(g)
				defer gw.Close()
				res, body := do(t, "GET", gw.URL+"/t/b/v2/service_instances/i/last_operation", t1User, t1Pass, "2.14", nil)
				if res.StatusCode != tc.status {
					t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
				}
				if tc.desc == "" {
					if diff := cmp.Diff(`{"state":"in progress"}`, body); diff != "" {
						t.Errorf("body (-want +got):\n%s", diff)
					}
					return
				}
				var e struct{ Description string }
				if err := json.Unmarshal([]byte(body), &e); err != nil || !strings.HasPrefix(e.Description, tc.desc) {
					t.Errorf("description %q, want it to start %q", e.Description, tc.desc)
				}
			})
		}
	}
}

// rawBroker is a broker on loopback that reads each request and answers
// it with answer's bytes, then closes the connection.
func rawBroker(t *testing.T, answer func(c net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if _, err := http.ReadRequest(bufio.NewReader(c)); err == nil {
					answer(c)
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String()
}
