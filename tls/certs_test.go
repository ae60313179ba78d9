package tls

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// testCA is a certificate authority for tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

var serials struct {
	sync.Mutex
	n int64
}

func nextSerial() *big.Int {
	serials.Lock()
	defer serials.Unlock()
	serials.n++
	return big.NewInt(serials.n)
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func (ca *testCA) pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// certSpec is what a test certificate says; zero times mean valid from an
// hour ago for a day.
type certSpec struct {
	subject             pkix.Name
	dns, emails, uris   []string
	ips                 []net.IP
	notBefore, notAfter time.Time
	client              bool
}

// issued is a certificate with its key, as PEM and parsed.
type issued struct {
	certPEM, keyPEM []byte
	leaf            *x509.Certificate
	tls             cryptotls.Certificate
}

func (ca *testCA) issue(t *testing.T, s certSpec) issued {
	t.Helper()
	if s.notBefore.IsZero() {
		s.notBefore = time.Now().Add(-time.Hour)
	}
	if s.notAfter.IsZero() {
		s.notAfter = time.Now().Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if s.client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: nextSerial(), Subject: s.subject, DNSNames: s.dns,
		EmailAddresses: s.emails, IPAddresses: s.ips, NotBefore: s.notBefore, NotAfter: s.notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, u := range s.uris {
		parsed, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, parsed)
	}
	key := newKey(t)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	out := issued{certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})}
	out.leaf, _ = x509.ParseCertificate(der)
	if out.tls, err = cryptotls.X509KeyPair(out.certPEM, out.keyPEM); err != nil {
		t.Fatal(err)
	}
	return out
}

// writeFile writes data to dir/name by rename, as deploy tools replace
// certificates, and returns the path.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		t.Fatal(err)
	}
	return path
}

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
