package lean

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestTLS: a broker over TLS, with and without a required client
// certificate; the server name defaults to the URL's host, connections are
// reused, and the answer carries the connection's TLS state.
func TestTLS(t *testing.T) {
	ca := osbtest.NewCA("test CA")
	serverCert := ca.Issue(osbtest.CertSpec{DNS: []string{"broker.internal"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}}).TLS
	clientCert := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "gateway-client"}}).TLS

	tests := []struct {
		name       string
		clientAuth tls.ClientAuthType
		client     *tls.Config
		wantErr    string // "" for 200
		wantCN     string
	}{
		{"TLS, name from the URL", tls.NoClientCert, &tls.Config{RootCAs: ca.Pool()}, "", ""},
		{"TLS, server name set", tls.NoClientCert, &tls.Config{RootCAs: ca.Pool(), ServerName: "broker.internal"}, "", ""},
		{"mTLS", tls.RequireAndVerifyClientCert, &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}, "", "gateway-client"},
		{"mTLS without a client certificate", tls.RequireAndVerifyClientCert, &tls.Config{RootCAs: ca.Pool()}, "certificate required", ""},
		{"unknown CA", tls.NoClientCert, &tls.Config{}, "unknown authority", ""},
		{"wrong name", tls.NoClientCert, &tls.Config{RootCAs: ca.Pool(), ServerName: "other.internal"}, "not other.internal", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var seenCN atomic.Value
			srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if len(r.TLS.PeerCertificates) > 0 {
					seenCN.Store(r.TLS.PeerCertificates[0].Subject.CommonName)
				}
				_, _ = io.WriteString(w, "ok")
			}))
			var conns atomic.Int32
			srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			}
			srv.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: ca.Pool(), ClientAuth: tc.clientAuth}
			srv.Config.ErrorLog = log.New(io.Discard, "", 0)
			srv.StartTLS()
			defer srv.Close()
			tr := &Transport{TLSClientConfig: tc.client}
			defer tr.CloseIdleConnections()
			for range 2 {
				res, body, err := call(t, tr, "GET", srv.URL+"/v2/catalog")
				if tc.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
						t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
					}
					return
				}
				if err != nil || body != "ok" {
					t.Fatalf("%q %v", body, err)
				}
				if res.TLS == nil || !res.TLS.HandshakeComplete {
					t.Error("answer without the connection's TLS state")
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("%d connections for two calls, want 1", n)
			}
			if cn, _ := seenCN.Load().(string); cn != tc.wantCN {
				t.Errorf("broker saw client certificate %q, want %q", cn, tc.wantCN)
			}
		})
	}
}
