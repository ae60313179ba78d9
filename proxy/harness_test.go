package proxy

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// Credentials used by the test configurations.
const (
	brokerUser = "broker-user"
	brokerPass = "broker-s3cret-never-shown"
	t1User     = "t1-user"
	t1Pass     = "t1-pass"
	t2User     = "t2-user"
	t2Pass     = "t2-pass"
)

// twoTenantYAML is a configuration with tenants t1 (brokers b1, b2) and t2
// (broker b2 only, and missing_version_status 400), and brokers b1 (2.13 to
// 2.15, 300ms timeout) and b2. The fake brokers serve no catalog, so both
// forward calls without the catalog checks (validation.without_catalog).
const twoTenantYAML = `
listen: {address: "127.0.0.1:0", max_body_bytes: 4096}
admin: {address: "off"}
brokers:
  - name: b1
    url: ${B1_URL}
    username: broker-user
    password: ${BROKER_PASS}
    api_version: {min: "2.13", max: "2.15"}
    timeout: 300ms
    validation: {without_catalog: forward}
  - name: b2
    url: ${B2_URL}/base/
    validation: {without_catalog: forward}
tenants:
  - name: t1
    credentials:
      - {username: old-user, password: old-pass}
      - {username: t1-user, password: t1-pass}
    routes: [{broker: b1}, {broker: b2}]
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    missing_version_status: 400
    routes: [{broker: b2, prefix: /platform-two/shared}]
`

// testGateway builds a Gateway from yaml with env and serves it on a real
// loopback socket.
func testGateway(t *testing.T, yaml string, env map[string]string) (*Gateway, *httptest.Server) {
	t.Helper()
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

// twoTenants starts two backends and a gateway for twoTenantYAML.
func twoTenants(t *testing.T) (gw *httptest.Server, b1, b2 *osbtest.Broker) {
	t.Helper()
	b1, b2 = osbtest.NewBroker(t, nil), osbtest.NewBroker(t, nil)
	_, gw = testGateway(t, twoTenantYAML, env(b1.URL, b2.URL))
	return gw, b1, b2
}

// do sends a request through the real client with basic auth and version
// (osbtest.Do).
func do(t *testing.T, method, url, user, pass, version string, body io.Reader) (*http.Response, string) {
	t.Helper()
	return osbtest.Do(t, method, url, user, pass, version, body)
}

// sendInBackground sends req with the default client and returns where
// its error arrives, for tests that hang up on a call in flight.
func sendInBackground(req *http.Request) <-chan error {
	return sendInBackgroundWith(http.DefaultClient, req)
}

// sendInBackgroundWith is sendInBackground with client c.
func sendInBackgroundWith(c *http.Client, req *http.Request) <-chan error {
	errc := make(chan error, 1)
	go func() {
		res, err := c.Do(req)
		if err == nil {
			res.Body.Close()
		}
		errc <- err
	}()
	return errc
}

// raw sends request bytes as written over a fresh TCP connection, so paths
// reach the gateway exactly as a hostile client would send them.
func raw(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading response to %q: %v", request, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// env is the environment for twoTenantYAML with brokers b1 and b2 at the
// given URLs.
func env(b1URL, b2URL string) map[string]string {
	return map[string]string{"B1_URL": b1URL, "B2_URL": b2URL, "BROKER_PASS": brokerPass}
}

// resettingClient is a client whose connections close with a reset
// (SO_LINGER 0): a canceled request is a platform gone, not a half-close.
func resettingClient(t *testing.T) *http.Client {
	var d net.Dialer
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := d.DialContext(ctx, network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetLinger(0)
		}
		return c, err
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}
