package main

import (
	"bytes"
	"context"
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/tls/pebbletest"
)

// tlsConfig is a one-tenant configuration whose listener speaks TLS;
// LISTEN_TLS is the listen.tls flow mapping, BROKER_URL the broker.
const tlsConfig = `
listen: {address: LISTEN_ADDRESS, shutdown_grace: 5s, tls: LISTEN_TLS}
state: {backend: memory}
admin: {address: "127.0.0.1:0"}
brokers: [{name: b, url: BROKER_URL}]
tenants: [{name: t, credentials: [{username: u, password: pass}], routes: [{broker: b}]}]
`

func writeTLSConfig(t *testing.T, dir, listen, listenTLS, brokerURL string) string {
	t.Helper()
	path := filepath.Join(dir, "gateway.yaml")
	y := strings.NewReplacer("LISTEN_ADDRESS", listen, "LISTEN_TLS", listenTLS, "BROKER_URL", brokerURL).Replace(tlsConfig)
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// issueServer writes a server certificate from ca for name, valid until
// notAfter, and its key to dir/tls.crt and dir/tls.key (replacing them by
// rename) and returns its serial number.
func issueServer(t *testing.T, ca *osbtest.CA, dir, name string, notAfter time.Time) *big.Int {
	t.Helper()
	c := ca.Issue(osbtest.CertSpec{Subject: pkix.Name{CommonName: name}, DNS: []string{name}, NotAfter: notAfter})
	c.WriteFiles(t, dir, "tls.crt", "tls.key")
	return c.Leaf.SerialNumber
}

// httpsClient reaches addr for every host name, trusting roots.
func httpsClient(roots *x509.CertPool, addr string) *http.Client {
	return &http.Client{
		Timeout: 15 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			},
			TLSClientConfig: &cryptotls.Config{RootCAs: roots}, ForceAttemptHTTP2: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// lastOpBroker answers every request with a last operation naming name.
func lastOpBroker(name string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"state":"succeeded","description":"`+name+`"}`)
	}))
}

// lastOpOver asks for the last operation of an instance at base through c.
func lastOpOver(c *http.Client, base string) (*http.Response, string, error) {
	req, _ := http.NewRequest("GET", base+"/t/b/v2/service_instances/i/last_operation", nil)
	req.SetBasicAuth("u", "pass")
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, err := c.Do(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b), nil
}

// TestServeTLSFiles runs the gateway with certificate files: a platform
// reaches the broker over HTTPS (HTTP/2), plain HTTP is redirected, and
// SIGHUP's reload serves replaced files to new connections while an open
// one goes on.
func TestServeTLSFiles(t *testing.T) {
	broker := lastOpBroker("one")
	defer broker.Close()
	dir, ca := t.TempDir(), osbtest.NewCA("test CA")
	first := issueServer(t, ca, dir, "gw.test", time.Now().Add(24*time.Hour))
	path := writeTLSConfig(t, dir, `"127.0.0.1:0"`,
		`{mode: files, cert_file: tls.crt, key_file: tls.key, reload_interval: 1h, http_address: "127.0.0.1:0"}`, broker.URL)
	s := startServer(t, path)
	if got := s.serverKind(); got != config.ServerStandard {
		t.Errorf("a TLS listener served by %s, want net/http's (listen.server is lean by default)", got)
	}
	kept := httpsClient(ca.Pool(), s.mainLn.Addr().String())

	res, body, err := lastOpOver(kept, "https://gw.test")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != 200 || body != `{"state":"succeeded","description":"one"}` || res.ProtoMajor != 2 {
		t.Fatalf("HTTPS last operation: %s %d %s", res.Proto, res.StatusCode, body)
	}
	if got := res.TLS.PeerCertificates[0].SerialNumber; got.Cmp(first) != 0 {
		t.Errorf("serial %v, want %v", got, first)
	}

	res, _, err = lastOpOver(httpsClient(nil, s.httpLn.Addr().String()), "http://gw.test")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(s.mainLn.Addr().String())
	if want := "https://gw.test:" + port + "/t/b/v2/service_instances/i/last_operation"; res.StatusCode != 308 || res.Header.Get("Location") != want {
		t.Errorf("plain HTTP: %d Location %q, want 308 %q", res.StatusCode, res.Header.Get("Location"), want)
	}

	second := issueServer(t, ca, dir, "gw.test", time.Now().Add(24*time.Hour))
	if err := s.reload(); err != nil {
		t.Fatal(err)
	}
	res, _, err = lastOpOver(httpsClient(ca.Pool(), s.mainLn.Addr().String()), "https://gw.test")
	if err != nil || res.TLS.PeerCertificates[0].SerialNumber.Cmp(second) != 0 {
		t.Fatalf("after reload a new connection got %v, %v; want serial %v", res, err, second)
	}
	res, _, err = lastOpOver(kept, "https://gw.test")
	if err != nil || res.StatusCode != 200 || res.TLS.PeerCertificates[0].SerialNumber.Cmp(first) != 0 {
		t.Errorf("the open connection after reload: %v, %v; want it to go on with serial %v", res, err, first)
	}
}

// TestServeACME runs the gateway with a certificate it obtains from an
// in-process Pebble (TLS-ALPN-01 on the listener) and serves a platform's
// request with it.
func TestServeACME(t *testing.T) {
	broker := lastOpBroker("acme")
	defer broker.Close()
	addr := osbtest.FreeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	tlsPort, _ := strconv.Atoi(port)
	p := pebbletest.Start(t, pebbletest.Options{TLSPort: tlsPort})
	dir := t.TempDir()
	path := writeTLSConfig(t, dir, `"`+addr+`"`, `{mode: acme, domains: [gateway.osb.test], ca: "`+p.Directory+
		`", ca_root: "`+p.ServerRoot+`", email: ops@osb.test, storage: certmagic, challenges: [tls-alpn-01]}`, broker.URL)
	startServer(t, path)

	c := httpsClient(p.Roots, addr)
	deadline := time.Now().Add(20 * time.Second)
	for {
		res, body, err := lastOpOver(c, "https://gateway.osb.test")
		if err == nil {
			if res.StatusCode != 200 || body != `{"state":"succeeded","description":"acme"}` {
				t.Fatalf("HTTPS last operation: %d %s", res.StatusCode, body)
			}
			if got := res.TLS.PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "gateway.osb.test" {
				t.Errorf("certificate names %v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no certificate after 20s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "certmagic", "certificates")); err != nil {
		t.Errorf("storage (relative to the configuration file) holds no certificates: %v", err)
	}
}

// TestCheckCertificateFiles runs "osb-gateway check" on configurations
// whose certificate files fail or need attention soon.
func TestCheckCertificateFiles(t *testing.T) {
	ca := osbtest.NewCA("test CA")
	expiredDir, soonDir := t.TempDir(), t.TempDir()
	issueServer(t, ca, expiredDir, "old.example.com", time.Now().Add(-time.Hour))
	issueServer(t, ca, soonDir, "gw.example.com", time.Now().Add(10*24*time.Hour+time.Hour))
	listenTLS := `{mode: files, cert_file: tls.crt, key_file: tls.key, domains: [gw.example.com]}`
	expired := writeTLSConfig(t, expiredDir, `"127.0.0.1:8443"`, listenTLS, "https://b.example.com")
	soon := writeTLSConfig(t, soonDir, `"127.0.0.1:8443"`, listenTLS, "https://b.example.com")

	var stdout, stderr bytes.Buffer
	if code := runCheck([]string{"-offline", "-config", expired}, &stdout, &stderr); code != 1 || stdout.Len() != 0 {
		t.Errorf("expired: exit %d, stdout %q; want 1 and nothing", code, stdout.String())
	}
	for _, want := range []string{
		expired + ": listen.tls.cert_file: " + filepath.Join(expiredDir, "tls.crt") + `: certificate "CN=old.example.com" expired on `,
		expired + `: listen.tls.domains[0]: "gw.example.com" is not covered by the certificate in cert_file (it covers DNS:old.example.com)`,
		expired + ": 2 certificate problems\n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}

	stdout.Reset()
	stderr.Reset()
	if code := runCheck([]string{"-offline", "-config", soon}, &stdout, &stderr); code != 0 {
		t.Errorf("expiring soon: exit %d, want 0\n%s", code, stderr.String())
	}
	if want := ": listen.tls.cert_file: warning: "; !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "in 10 days") {
		t.Errorf("stderr = %q, want a warning about 10 days left", stderr.String())
	}
	if want := soon + ": valid (1 tenant, 1 broker, 1 route)\n"; stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
}
