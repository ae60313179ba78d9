package e2e

import (
	"net"
	"net/http"
	"os"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
	"github.com/osb-gateway/osb-gateway/proxy"
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
	return serveGatewayOn(t, h, suiteServer)
}

// serveGatewayOn is serveGateway on the server named (listen.server: lean
// or "" for lean, standard), wired as osb-gateway serve wires it.
func serveGatewayOn(t *testing.T, h http.Handler, server string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	if server == config.ServerStandard {
		srv := &http.Server{Handler: h, ReadHeaderTimeout: config.DefaultReadHeaderTimeout, ReadTimeout: config.DefaultReadTimeout,
			WriteTimeout: config.DefaultWriteTimeout, IdleTimeout: config.DefaultIdleTimeout, MaxHeaderBytes: config.DefaultMaxHeaderBytes}
		ln = proxy.ServeStandard(srv, ln)
		go func() { defer close(done); _ = srv.Serve(ln) }()
		t.Cleanup(func() { _ = srv.Close(); <-done })
		return "http://" + ln.Addr().String()
	}
	s := &lean.Server{Handler: h, ReadHeaderTimeout: config.DefaultReadHeaderTimeout, ReadTimeout: config.DefaultReadTimeout,
		WriteTimeout: config.DefaultWriteTimeout, IdleTimeout: config.DefaultIdleTimeout, MaxHeaderBytes: config.DefaultMaxHeaderBytes}
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return "http://" + ln.Addr().String()
}
