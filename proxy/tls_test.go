package proxy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA issues certificates for the mTLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	file string
}

func newTestCA(t *testing.T, dir string) *testCA {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	file := filepath.Join(dir, "ca.pem")
	_ = os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	return &testCA{cert: cert, key: key, file: file}
}

// issue returns a certificate for name, and writes it and its key to dir.
func (ca *testCA) issue(t *testing.T, dir, name string, usage x509.ExtKeyUsage) (tls.Certificate, string, string) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{name}, ExtKeyUsage: []x509.ExtKeyUsage{usage}, KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
	cf, kf := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	_ = os.WriteFile(cf, certPEM, 0o600)
	_ = os.WriteFile(kf, keyPEM, 0o600)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return pair, cf, kf
}

// TestUpstreamMutualTLS: a broker that requires a client certificate
// signed by its CA, reached through the gateway with the broker's CA
// bundle, client certificate and server name from the configuration.
func TestUpstreamMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newTestCA(t, dir)
	serverPair, _, _ := ca.issue(t, dir, "broker.internal", x509.ExtKeyUsageServerAuth)
	_, clientCert, clientKey := ca.issue(t, dir, "gateway-client", x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)

	var seenCN string
	broker := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenCN = r.TLS.PeerCertificates[0].Subject.CommonName
		_, _ = w.Write([]byte(`{"services":[]}`))
	}))
	broker.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	broker.Config.ErrorLog = log.New(io.Discard, "", 0)
	broker.StartTLS()
	defer broker.Close()

	const yamlTmpl = `
admin: {address: "off"}
brokers:
  - name: secure
    url: ${URL}
    timeout: 2s
    tls: {TLS}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: secure}]
`
	tests := []struct {
		name   string
		tls    string
		status int
		want   string
	}{
		{"CA, client certificate and server name", `{ca_file: CA, cert_file: CERT, key_file: KEY, server_name: broker.internal}`, 200, ""},
		{"no client certificate", `{ca_file: CA, server_name: broker.internal}`, 502, `broker \"secure\" refused the TLS handshake (if it requires a client certificate, set brokers[].tls.cert_file and key_file): tls: certificate required`},
		{"unknown CA", `{cert_file: CERT, key_file: KEY, server_name: broker.internal}`, 502, "its certificate is signed by an unknown authority"},
		{"name mismatch", `{ca_file: CA, cert_file: CERT, key_file: KEY, server_name: other.internal}`, 502, "certificate is valid for broker.internal, not other.internal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settings := strings.NewReplacer("CA", ca.file, "CERT", clientCert, "KEY", clientKey).Replace(tc.tls)
			y := strings.Replace(yamlTmpl, "{TLS}", settings, 1)
			_, gw := testGateway(t, y, map[string]string{"URL": broker.URL})
			res, body := do(t, "GET", gw.URL+"/t1/secure/v2/service_instances/x/last_operation", t1User, t1Pass, "2.14", nil)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if tc.status == 200 && seenCN != "gateway-client" {
				t.Errorf("broker saw client certificate %q", seenCN)
			}
			if !strings.Contains(body, tc.want) {
				t.Errorf("description %s does not say %q", body, tc.want)
			}
		})
	}
}
