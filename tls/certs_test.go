package tls

import (
	"context"
	cryptotls "crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"
)

// serveTLS serves h over TLS from s on a loopback listener, as the
// gateway does, until the test ends, and returns the listener's address.
func serveTLS(t *testing.T, s *Server, ln net.Listener, h http.Handler) string {
	t.Helper()
	srv := &http.Server{Handler: h, TLSConfig: s.Config(), ReadHeaderTimeout: 5 * time.Second,
		ErrorLog: slog.NewLogLogger(slog.NewTextHandler(io.Discard, nil), slog.LevelWarn)}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(s.Wrap(ln)) }()
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
		s.Close()
	})
	return ln.Addr().String()
}

// listen opens a loopback listener closed at the test's end.
func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// client returns an HTTP client that trusts roots and dials addr for
// every host, with HTTP/2 allowed, as a platform reaching the gateway by
// name would. With certs it sends the first as its client certificate,
// whichever CAs the server names.
func client(roots *x509.CertPool, addr string, certs ...cryptotls.Certificate) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	tc := &cryptotls.Config{RootCAs: roots}
	if len(certs) > 0 {
		tc.GetClientCertificate = func(*cryptotls.CertificateRequestInfo) (*cryptotls.Certificate, error) { return &certs[0], nil }
	}
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return d.DialContext(ctx, network, addr)
			},
			TLSClientConfig:   tc,
			ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// okHandler answers 200 "ok".
var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

// quietLog discards everything; tests assert on the wire, not on logs.
var quietLog = slog.New(slog.NewTextHandler(io.Discard, nil))
