package proxy

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestUpstreamMutualTLS: a broker that requires a client certificate
// signed by its CA, reached through the gateway with the broker's CA
// bundle, client certificate and server name from the configuration.
func TestUpstreamMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := osbtest.NewCA("test CA")
	caFile := osbtest.WriteFile(t, dir, "ca.pem", ca.PEM)
	serverPair := ca.Issue(osbtest.CertSpec{DNS: []string{"broker.internal"}}).TLS
	clientCert, clientKey := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "gateway-client"}}).
		WriteFiles(t, dir, "gateway-client.crt", "gateway-client.key")

	var seenCN string
	broker := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenCN = r.TLS.PeerCertificates[0].Subject.CommonName
		_, _ = w.Write([]byte(`{"services":[]}`))
	}))
	broker.TLS = &tls.Config{Certificates: []tls.Certificate{serverPair}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
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
		{"name mismatch", `{ca_file: CA, cert_file: CERT, key_file: KEY, server_name: other.internal}`, 502, `broker \"secure\" failed the TLS handshake: its certificate does not cover the name the gateway checks`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			settings := strings.NewReplacer("CA", caFile, "CERT", clientCert, "KEY", clientKey).Replace(tc.tls)
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
