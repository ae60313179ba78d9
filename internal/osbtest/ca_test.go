package osbtest

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCAIssue(t *testing.T) {
	ca := NewCA("test CA")
	notAfter := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	tests := []struct {
		name  string
		spec  CertSpec
		usage x509.ExtKeyUsage
	}{
		{"server", CertSpec{DNS: []string{"gw.test"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509.ExtKeyUsageServerAuth},
		{"client", CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller"},
			Emails: []string{"cc@example.com"}, URIs: []string{"spiffe://cf/cc"}, NotAfter: notAfter}, x509.ExtKeyUsageClientAuth},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ca.Issue(tc.spec)
			if _, err := c.Leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
				t.Fatalf("the certificate does not verify against its CA for %v: %v", tc.usage, err)
			}
			got := CertSpec{Subject: pkix.Name{CommonName: c.Leaf.Subject.CommonName}, DNS: c.Leaf.DNSNames, Emails: c.Leaf.EmailAddresses,
				IPs: c.Leaf.IPAddresses, Client: tc.spec.Client}
			for _, u := range c.Leaf.URIs {
				got.URIs = append(got.URIs, u.String())
			}
			want := tc.spec
			want.NotAfter = time.Time{}
			ipEqual := cmp.Comparer(func(a, b net.IP) bool { return a.Equal(b) })
			if d := cmp.Diff(want, got, ipEqual); d != "" {
				t.Errorf("certificate says (-asked +got):\n%s", d)
			}
			if !tc.spec.NotAfter.IsZero() && !c.Leaf.NotAfter.Equal(tc.spec.NotAfter) {
				t.Errorf("NotAfter = %v, want %v", c.Leaf.NotAfter, tc.spec.NotAfter)
			}
			if tc.spec.NotAfter.IsZero() && !(c.Leaf.NotBefore.Before(time.Now()) && c.Leaf.NotAfter.After(time.Now().Add(23*time.Hour))) {
				t.Errorf("default validity %v to %v does not cover now and the next 23 hours", c.Leaf.NotBefore, c.Leaf.NotAfter)
			}
		})
	}
	if a, b := ca.Issue(CertSpec{}), ca.Issue(CertSpec{}); a.Leaf.SerialNumber.Cmp(b.Leaf.SerialNumber) == 0 {
		t.Errorf("two certificates share serial %v", a.Leaf.SerialNumber)
	}
}

// TestCAHandshake serves an issued certificate and requires an issued
// client certificate over a real loopback TLS connection.
func TestCAHandshake(t *testing.T) {
	ca := NewCA("handshake CA")
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Issue(CertSpec{DNS: []string{"broker.test"}}).TLS},
		ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	srv.StartTLS()
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), ServerName: "broker.test",
		Certificates: []tls.Certificate{ca.Issue(CertSpec{Client: true, Subject: pkix.Name{CommonName: "gateway"}}).TLS}}}}
	res, err := client.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); string(b) != "gateway" {
		t.Errorf("the server saw client %q, want gateway", b)
	}
}

func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	c := NewCA("files CA").Issue(CertSpec{DNS: []string{"gw.test"}})
	c.WriteFiles(t, dir, "tls.crt", "tls.key")
	certFile, keyFile := c.WriteFiles(t, dir, "tls.crt", "tls.key") // replacing works too
	if _, err := tls.LoadX509KeyPair(certFile, keyFile); err != nil {
		t.Fatalf("the written pair does not load: %v", err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("dir holds %d files, want the 2 written and no temporary ones", len(entries))
	}
}
