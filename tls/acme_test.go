package tls

import (
	"context"
	cryptotls "crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/tls/pebbletest"
)

// portOf returns a listener's port.
func portOf(ln net.Listener) int { return ln.Addr().(*net.TCPAddr).Port }

// testLogger returns a logger whose records are shown if the test fails.
func testLogger(t *testing.T) *slog.Logger {
	logs := &osbtest.Buffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// acmeTLS is listen.tls for an ACME mode against p, with its own storage.
// Tests running in parallel use different names: certmagic keeps the
// challenges in progress in one map per process, by name.
func acmeTLS(t *testing.T, p *pebbletest.Pebble, mode string, challenges ...string) config.ListenTLS {
	return config.ListenTLS{Mode: mode, CA: p.Directory, CARoot: p.ServerRoot, Email: "ops@osb.test",
		Storage: t.TempDir(), Challenges: challenges, MinVersion: "1.2"}
}

// startACME builds a Server for c on ln and serves okHandler through it.
func startACME(t *testing.T, c config.ListenTLS, ln net.Listener, opts Options) *Server {
	t.Helper()
	opts.Logger = testLogger(t)
	s, err := NewServer(c, ln.Addr().String(), opts)
	if err != nil {
		t.Fatal(err)
	}
	serveTLS(t, s, ln, okHandler)
	return s
}

// waitHTTPS requests url through c until a handshake succeeds (the
// certificate is there) and returns the response, its body read.
func waitHTTPS(t *testing.T, c *http.Client, url string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if res.StatusCode != 200 || string(body) != "ok" {
				t.Fatalf("GET %s: %d %q", url, res.StatusCode, body)
			}
			return res
		}
		if time.Now().After(deadline) {
			t.Fatalf("no HTTPS after 20s: %v", err)
		}
		c.CloseIdleConnections()
		time.Sleep(100 * time.Millisecond)
	}
}

// checkIssued checks that the connection's certificate is Pebble's, for
// name, and chains to Pebble's root.
func checkIssued(t *testing.T, state *cryptotls.ConnectionState, p *pebbletest.Pebble, name string) *x509.Certificate {
	t.Helper()
	leaf := state.PeerCertificates[0]
	if diff := cmp.Diff([]string{name}, leaf.DNSNames); diff != "" {
		t.Errorf("certificate names (-want +got):\n%s", diff)
	}
	inter := x509.NewCertPool()
	for _, c := range state.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: p.Roots, Intermediates: inter, DNSName: name}); err != nil {
		t.Errorf("certificate does not chain to Pebble's root: %v", err)
	}
	return leaf
}

// TestACMEIssuance obtains a certificate from Pebble with the TLS-ALPN-01
// challenge, answered by the listener itself, and serves a request with
// it over HTTP/2.
func TestACMEIssuance(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	p := pebbletest.Start(t, pebbletest.Options{TLSPort: portOf(ln)})
	c := acmeTLS(t, p, config.TLSModeACME, config.ChallengeTLSALPN01)
	c.Domains = []string{"alpn.osb.test"}
	startACME(t, c, ln, Options{})

	res := waitHTTPS(t, client(p.Roots, ln.Addr().String()), "https://alpn.osb.test/")
	checkIssued(t, res.TLS, p, "alpn.osb.test")
	if res.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", res.Proto)
	}
}

// TestACMEHTTP01 obtains a certificate with the HTTP-01 challenge,
// answered on the HTTP listener, which redirects everything else.
func TestACMEHTTP01(t *testing.T) {
	t.Parallel()
	ln, httpLn := listen(t), listen(t)
	p := pebbletest.Start(t, pebbletest.Options{HTTPPort: portOf(httpLn), TLSPort: portOf(ln)})
	c := acmeTLS(t, p, config.TLSModeACME, config.ChallengeHTTP01)
	c.Domains, c.HTTPAddress = []string{"http.osb.test"}, httpLn.Addr().String()
	s := startACME(t, c, ln, Options{})
	plain := &http.Server{Handler: s.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = plain.Serve(httpLn) }()
	t.Cleanup(func() { _ = plain.Close() })

	res := waitHTTPS(t, client(p.Roots, ln.Addr().String()), "https://http.osb.test/")
	checkIssued(t, res.TLS, p, "http.osb.test")

	res, err := client(nil, httpLn.Addr().String()).Get("http://http.osb.test/cf/mysql/v2/catalog")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	want := "https://http.osb.test:" + strconv.Itoa(portOf(ln)) + "/cf/mysql/v2/catalog"
	if res.StatusCode != http.StatusPermanentRedirect || res.Header.Get("Location") != want {
		t.Errorf("plain HTTP: %d Location %q, want 308 %q", res.StatusCode, res.Header.Get("Location"), want)
	}
}

// renewRuns numbers TestACMERenewal's runs.
var renewRuns atomic.Int64

// TestACMERenewal has Pebble issue certificates valid for 6 seconds and
// waits for certmagic to replace the first one before it expires.
func TestACMERenewal(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	p := pebbletest.Start(t, pebbletest.Options{TLSPort: portOf(ln), Validity: 6})
	c := acmeTLS(t, p, config.TLSModeACME, config.ChallengeTLSALPN01)
	// certmagic keeps its renewal backoff in one map per process, by
	// name: a renewal that a previous run (-count) left failing at its
	// cleanup must not hold this run's back.
	name := "renew" + strconv.FormatInt(renewRuns.Add(1), 10) + ".osb.test"
	c.Domains = []string{name}
	startACME(t, c, ln, Options{RenewCheckInterval: 250 * time.Millisecond})

	cl := client(p.Roots, ln.Addr().String())
	first := checkIssued(t, waitHTTPS(t, cl, "https://"+name+"/").TLS, p, name)
	for {
		cl.CloseIdleConnections()
		res := waitHTTPS(t, cl, "https://"+name+"/")
		leaf := checkIssued(t, res.TLS, p, name)
		if leaf.SerialNumber.Cmp(first.SerialNumber) != 0 {
			// Certificates carry whole seconds, and ARI may pick a renewal
			// time within a second of the first issuance: the two can end
			// at the same second, but the new one never ends earlier.
			if leaf.NotAfter.Before(first.NotAfter) || leaf.NotBefore.Before(first.NotBefore) {
				t.Errorf("renewed certificate is valid %v to %v, earlier than the first's %v to %v",
					leaf.NotBefore, leaf.NotAfter, first.NotBefore, first.NotAfter)
			}
			return
		}
		if time.Now().After(first.NotAfter) {
			t.Fatalf("the certificate expired at %v without renewal", first.NotAfter)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOnDemand obtains certificates at the first handshake for allowed
// names only; a handshake for any other name fails.
func TestOnDemand(t *testing.T) {
	t.Parallel()
	ln := listen(t)
	p := pebbletest.Start(t, pebbletest.Options{TLSPort: portOf(ln)})
	c := acmeTLS(t, p, config.TLSModeOnDemand, config.ChallengeTLSALPN01)
	c.OnDemand.Allow = []string{"ondemand.osb.test", "*.tenants.osb.test"}
	startACME(t, c, ln, Options{})

	tests := []struct {
		name    string
		sni     string
		allowed bool
	}{
		{"exact name", "ondemand.osb.test", true},
		{"one label under the wildcard", "cf-prod.tenants.osb.test", true},
		{"name not on the list", "evil.osb.test", false},
		{"two labels under the wildcard", "a.cf-prod.tenants.osb.test", false},
		{"the wildcard's own domain", "tenants.osb.test", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &cryptotls.Dialer{NetDialer: &net.Dialer{Timeout: 20 * time.Second},
				Config: &cryptotls.Config{ServerName: tc.sni, RootCAs: p.Roots}}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			conn, err := d.DialContext(ctx, "tcp", ln.Addr().String())
			if !tc.allowed {
				if err == nil {
					conn.Close()
					t.Fatalf("handshake for %s succeeded, want it refused", tc.sni)
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake for %s: %v", tc.sni, err)
			}
			defer conn.Close()
			state := conn.(*cryptotls.Conn).ConnectionState()
			checkIssued(t, &state, p, tc.sni)
		})
	}
}
