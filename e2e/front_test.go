package e2e

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
)

// suiteServer is what serves every gateway of these tests to its
// platform (OSB_GATEWAY_TEST_SERVER: lean, as listen.server defaults to,
// or standard for net/http's), so that the whole suite passes on both.
var suiteServer = os.Getenv("OSB_GATEWAY_TEST_SERVER")

// serveGateway serves h on a loopback port with the suite's server, with
// the listener settings of a default gateway.yaml, until the test ends,
// and returns its base URL.
func serveGateway(t *testing.T, h http.Handler) string {
	t.Helper()
	if suiteServer == config.ServerStandard {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lean.Server{Handler: h, ReadHeaderTimeout: config.DefaultReadHeaderTimeout, ReadTimeout: config.DefaultReadTimeout,
		WriteTimeout: config.DefaultWriteTimeout, IdleTimeout: config.DefaultIdleTimeout, MaxHeaderBytes: config.DefaultMaxHeaderBytes}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return "http://" + ln.Addr().String()
}
