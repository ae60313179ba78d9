package tls

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// writePair writes a self-signed certificate and its key as PEM files.
func writePair(t *testing.T, dir, name string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalECPrivateKey(key)
	certFile, keyFile = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	_ = os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certFile, keyFile
}

func TestUpstream(t *testing.T) {
	dir := t.TempDir()
	caCert, _ := writePair(t, dir, "ca")
	clientCert, clientKey := writePair(t, dir, "client")
	_, otherKey := writePair(t, dir, "other")
	notPEM := filepath.Join(dir, "not.pem")
	_ = os.WriteFile(notPEM, []byte("hello"), 0o600)

	tc, err := Upstream(config.UpstreamTLS{CAFile: caCert, CertFile: clientCert, KeyFile: clientKey, ServerName: "broker.internal"})
	if err != nil {
		t.Fatal(err)
	}
	if tc.MinVersion != cryptotls.VersionTLS12 || tc.ServerName != "broker.internal" || tc.RootCAs == nil || len(tc.Certificates) != 1 {
		t.Errorf("config not built as asked: %+v", tc)
	}
	if tc, err := Upstream(config.UpstreamTLS{}); err != nil || tc.RootCAs != nil {
		t.Errorf("empty settings: system roots expected, got %v, %v", tc.RootCAs, err)
	}

	for _, tc := range []struct {
		name string
		in   config.UpstreamTLS
		want string
	}{
		{"missing CA file", config.UpstreamTLS{CAFile: filepath.Join(dir, "nope.pem")}, "reading ca_file"},
		{"CA file without PEM", config.UpstreamTLS{CAFile: notPEM}, "holds no PEM certificate"},
		{"key of another certificate", config.UpstreamTLS{CertFile: clientCert, KeyFile: otherKey}, "loading client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Upstream(tc.in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
