package proxy

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// A regression test for a hostile-client probe: 200 connections declaring
// 1 MiB bodies with a wrong password made the gateway buffer every body
// (RSS 41 → 605 MB), because the body stage ran before route and auth and
// each client got its 401 only once its body had arrived. Now a refused
// client gets its answer while it is still sending, and the connection is
// closed instead of drained. Each row sends only the request head, never
// the body it declares, and waits for the answer with a deadline.
func TestRefusalBeforeTheBodyIsRead(t *testing.T) {
	const limit = 1 << 20
	yaml := strings.Replace(twoTenantYAML, "max_body_bytes: 4096", fmt.Sprintf("max_body_bytes: %d", limit), 1)
	b1, b2 := osbtest.NewBroker(t, nil), osbtest.NewBroker(t, nil)
	_, gw := testGateway(t, yaml, env(b1.URL, b2.URL))
	addr := strings.TrimPrefix(gw.URL, "http://")
	const provision = "/v2/service_instances/i-1"
	wrong := basic(t1User, "wrong")
	tests := []struct {
		name   string
		path   string
		auth   string // Authorization value; "" sends none
		length string // Content-Length; "" sends Transfer-Encoding: chunked
		status int
	}{
		{"wrong password, 1 MiB − 1 declared (the probe)", "/t1/b1" + provision, wrong, fmt.Sprint(limit - 1), 401},
		{"wrong password, less than net/http drains by itself", "/t1/b1" + provision, wrong, "1000", 401},
		{"wrong password, over the body limit: 401, not 413", "/t1/b1" + provision, wrong, fmt.Sprint(2 * limit), 401},
		{"wrong password, chunked", "/t1/b1" + provision, wrong, "", 401},
		{"no credentials", "/t1/b1" + provision, "", "1000", 401},
		{"unknown route", "/nobody/b1" + provision, wrong, "1000", 404},
		{"unclean path", "/t1/b1/../b2" + provision, wrong, "1000", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Generous: a gateway that waits for the body never answers
			// (nothing is sent), and the read fails at the deadline.
			if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
				t.Fatal(err)
			}
			head := "PUT " + tc.path + " HTTP/1.1\r\nHost: gw\r\nX-Broker-API-Version: 2.14\r\nContent-Type: application/json\r\n"
			if tc.auth != "" {
				head += "Authorization: " + tc.auth + "\r\n"
			}
			if tc.length != "" {
				head += "Content-Length: " + tc.length + "\r\n"
			} else {
				head += "Transfer-Encoding: chunked\r\n"
			}
			if _, err := io.WriteString(c, head+"\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			res, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("no answer while the body is still to come: %v", err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if !res.Close {
				t.Errorf("Connection: %q, want close: the unread body must not be taken for the next request", res.Header.Get("Connection"))
			}
			// The gateway closes the connection rather than draining what the
			// client declared: the next read ends without a byte.
			if n, err := br.Read(make([]byte, 1)); n != 0 || err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("after the answer: read %d bytes, %v; want the connection closed", n, err)
			}
			if n := len(b1.Requests()) + len(b2.Requests()); n != 0 {
				t.Errorf("%d requests reached a broker", n)
			}
		})
	}
}

// The body stage never runs for a request that route or auth refuses: the
// chain does not read a byte of its body (the control row shows it reads
// all of it once the platform is authenticated).
func TestBodyStageNeverRunsForRefusedRequests(t *testing.T) {
	b1, b2 := osbtest.NewBroker(t, nil), osbtest.NewBroker(t, nil)
	cfg, err := config.Parse([]byte(twoTenantYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env(b1.URL, b2.URL)[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	var read atomic.Int64 // body bytes the chain read, over every request
	counting := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r2 := *r
			r2.Body = &countingBody{ReadCloser: r.Body, n: &read}
			next.ServeHTTP(w, &r2)
		})
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(counting(g))
	t.Cleanup(gw.Close)
	body := `{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s"}`
	tests := []struct {
		name       string
		path       string
		user, pass string
		status     int
		read       int64
	}{
		{"wrong password", "/t1/b1/v2/service_instances/i-1", t1User, "wrong", 401, 0},
		{"no credentials", "/t1/b1/v2/service_instances/i-1", "", "", 401, 0},
		{"unknown route", "/nobody/b1/v2/service_instances/i-1", t1User, t1Pass, 404, 0},
		{"authenticated (control)", "/t1/b2/v2/service_instances/i-1", t1User, t1Pass, 200, int64(len(body))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			read.Store(0)
			res, got := do(t, "PUT", gw.URL+tc.path, tc.user, tc.pass, "2.14", strings.NewReader(body))
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, got)
			}
			if n := read.Load(); n != tc.read {
				t.Errorf("the chain read %d body bytes, want %d", n, tc.read)
			}
		})
	}
}

// countingBody adds the bytes read through it to n.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}
