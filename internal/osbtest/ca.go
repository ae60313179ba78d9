package osbtest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// CA is a certificate authority for tests: an ECDSA P-256 root that issues
// server and client certificates. It is safe for concurrent use.
type CA struct {
	// Cert is the root certificate; PEM is the same, PEM-encoded, as a
	// CA bundle file holds it.
	Cert *x509.Certificate
	PEM  []byte
	key  *ecdsa.PrivateKey
}

// serials numbers every certificate of the process, so no two certificates
// a test sees share a serial number.
var serials atomic.Int64

// NewCA returns a root named name, valid from an hour ago for a day. It
// panics if the certificate cannot be made.
func NewCA(name string) *CA {
	key := newKey()
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serials.Add(1)), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der := must(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	return &CA{Cert: must(x509.ParseCertificate(der)), key: key,
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// Pool returns a certificate pool that holds only the root.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.Cert)
	return p
}

// CertSpec is what an issued certificate says. Zero times mean valid from
// an hour ago for a day; Client makes it a client certificate
// (ExtKeyUsageClientAuth) instead of a server one.
type CertSpec struct {
	Subject             pkix.Name
	DNS, Emails, URIs   []string
	IPs                 []net.IP
	NotBefore, NotAfter time.Time
	Client              bool
}

// Cert is an issued certificate with its key: PEM-encoded (the key as
// PKCS #8), parsed, and as a tls.Certificate ready to serve or present.
type Cert struct {
	CertPEM, KeyPEM []byte
	Leaf            *x509.Certificate
	TLS             tls.Certificate
}

// Issue returns a certificate signed by ca for s with a fresh key. It
// panics if s holds an unparsable URI or the certificate cannot be made.
func (ca *CA) Issue(s CertSpec) Cert {
	now := time.Now()
	if s.NotBefore.IsZero() {
		s.NotBefore = now.Add(-time.Hour)
	}
	if s.NotAfter.IsZero() {
		s.NotAfter = now.Add(24 * time.Hour)
	}
	usage := x509.ExtKeyUsageServerAuth
	if s.Client {
		usage = x509.ExtKeyUsageClientAuth
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serials.Add(1)), Subject: s.Subject, DNSNames: s.DNS,
		EmailAddresses: s.Emails, IPAddresses: s.IPs, NotBefore: s.NotBefore, NotAfter: s.NotAfter,
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}}
	for _, u := range s.URIs {
		tmpl.URIs = append(tmpl.URIs, must(url.Parse(u)))
	}
	key := newKey()
	der := must(x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key))
	c := Cert{CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: must(x509.MarshalPKCS8PrivateKey(key))}),
		Leaf:   must(x509.ParseCertificate(der))}
	c.TLS = must(tls.X509KeyPair(c.CertPEM, c.KeyPEM))
	return c
}

// WriteFiles writes the certificate and its key to dir/certName and
// dir/keyName, by rename, and returns their paths.
func (c Cert) WriteFiles(tb testing.TB, dir, certName, keyName string) (certFile, keyFile string) {
	tb.Helper()
	return WriteFile(tb, dir, certName, c.CertPEM), WriteFile(tb, dir, keyName, c.KeyPEM)
}

// WriteFile writes data to dir/name by rename, as deploy tools replace
// certificates, so a reader never sees half a file; it returns the path.
func WriteFile(tb testing.TB, dir, name string, data []byte) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	tmp, err := os.CreateTemp(dir, name+".tmp*")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := tmp.Write(data); err != nil {
		tb.Fatal(err)
	}
	if err := tmp.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		tb.Fatal(err)
	}
	return path
}

func newKey() *ecdsa.PrivateKey { return must(ecdsa.GenerateKey(elliptic.P256(), rand.Reader)) }

// must returns v, or panics with err: the failures it guards are a
// programming error in a test, as in httptest.NewServer.
func must[T any](v T, err error) T {
	if err != nil {
		panic("osbtest: " + err.Error())
	}
	return v
}
