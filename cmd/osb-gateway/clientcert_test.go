package main

import (
	cryptotls "crypto/tls"
	"crypto/x509/pkix"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestTenantClientCertificates: through a real TLS listener, a tenant in
// "sufficient" mode is authenticated by a matching client certificate
// alone, falls back to its password without one, and is refused with a
// certificate of another subject; a "required" tenant needs both.
func TestTenantClientCertificates(t *testing.T) {
	broker := lastOpBroker("ok")
	defer broker.Close()
	dir, ca := t.TempDir(), osbtest.NewCA("test CA")
	issueServer(t, ca, dir, "gw.test", time.Now().Add(24*time.Hour))
	osbtest.WriteFile(t, dir, "client-ca.pem", ca.PEM)
	y := `
listen: {address: "127.0.0.1:0", tls: {mode: files, cert_file: tls.crt, key_file: tls.key, client_ca_file: client-ca.pem}}
state: {backend: memory}
admin: {address: "127.0.0.1:0"}
brokers: [{name: b, url: "` + broker.URL + `"}]
tenants:
  - {name: t, credentials: [{username: u, password: pass}], routes: [{broker: b}],
     client_cert: {mode: sufficient, subjects: ["CN=cloud-controller"]}}
  - {name: r, credentials: [{username: u, password: pass}], routes: [{broker: b}],
     client_cert: {mode: required, subjects: ["CN=cloud-controller"]}}
`
	path := filepath.Join(dir, "gateway.yaml")
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, path)
	cc := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller"}}).TLS
	other := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "someone-else"}}).TLS
	client := func(cert *cryptotls.Certificate) *http.Client {
		c := httpsClient(ca.Pool(), s.mainLn.Addr().String())
		if cert != nil {
			c.Transport.(*http.Transport).TLSClientConfig.Certificates = []cryptotls.Certificate{*cert}
		}
		return c
	}
	call := func(c *http.Client, tenant, pass string) (int, string) {
		req, _ := http.NewRequest("GET", "https://gw.test/"+tenant+"/b/v2/service_instances/i/last_operation", nil)
		if pass != "" {
			req.SetBasicAuth("u", pass)
		}
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	for _, tc := range []struct {
		name, tenant, pass string
		cert               *cryptotls.Certificate
		want               int
		says               string
	}{
		{"sufficient: certificate alone", "t", "", &cc, 200, ""},
		{"sufficient: password without certificate", "t", "pass", nil, 200, ""},
		{"sufficient: nothing", "t", "", nil, 401, "credentials required"},
		{"sufficient: other subject", "t", "pass", &other, 401, "client certificate is not accepted"},
		{"required: certificate and password", "r", "pass", &cc, 200, ""},
		{"required: password only", "r", "pass", nil, 401, "client certificate is not accepted"},
		{"required: certificate only", "r", "", &cc, 401, "credentials required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body := call(client(tc.cert), tc.tenant, tc.pass)
			if code != tc.want || !strings.Contains(body, tc.says) {
				t.Errorf("%d %s, want %d saying %q", code, body, tc.want, tc.says)
			}
		})
	}
}
