package tls

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// verified is the connection state of a client that sent cert and had it
// verified by ca.
func verified(cert osbtest.Cert, ca *osbtest.CA) *cryptotls.ConnectionState {
	return &cryptotls.ConnectionState{PeerCertificates: []*x509.Certificate{cert.Leaf},
		VerifiedChains: [][]*x509.Certificate{{cert.Leaf, ca.Cert}}}
}

func mustRule(t *testing.T, c config.ClientCert) ClientCertRule {
	t.Helper()
	r, err := NewClientCertRule(c)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestMatchClientCert(t *testing.T) {
	ca := osbtest.NewCA("client CA")
	cc := ca.Issue(osbtest.CertSpec{Client: true,
		Subject: pkix.Name{CommonName: "cloud-controller", Organization: []string{"Example, Inc.", "cf-prod"}, OrganizationalUnit: []string{"platform"}},
		DNS:     []string{"cc.cf-prod.example.com"}, Emails: []string{"cc@CF.example.com"},
		URIs: []string{"spiffe://cf-prod/cloud-controller"}, IPs: []net.IP{net.ParseIP("10.0.0.7")}})
	sent := verified(cc, ca)
	unverified := &cryptotls.ConnectionState{PeerCertificates: []*x509.Certificate{cc.Leaf}}

	tests := []struct {
		name     string
		state    *cryptotls.ConnectionState
		subjects []string
		sans     []string
		want     error // nil, a sentinel, or any *ClientCertMismatchError
	}{
		{name: "plain HTTP", state: nil, subjects: []string{"CN=cloud-controller"}, want: ErrNoClientCert},
		{name: "no certificate sent", state: &cryptotls.ConnectionState{}, subjects: []string{"CN=cloud-controller"}, want: ErrNoClientCert},
		{name: "certificate not verified", state: unverified, subjects: []string{"CN=cloud-controller"}, want: ErrClientCertUnverified},
		{name: "common name", state: sent, subjects: []string{"CN=cloud-controller"}},
		{name: "every attribute named", state: sent, subjects: []string{"cn=cloud-controller, O=cf-prod, OU=platform"}},
		{name: "escaped comma in a value", state: sent, subjects: []string{`O=Example\, Inc.`}},
		{name: "one attribute differs", state: sent, subjects: []string{"CN=cloud-controller,O=cf-dev"}, want: &ClientCertMismatchError{}},
		{name: "second subject fits", state: sent, subjects: []string{"CN=other", "O=cf-prod"}},
		{name: "values are case sensitive", state: sent, subjects: []string{"CN=Cloud-Controller"}, want: &ClientCertMismatchError{}},
		{name: "DNS SAN ignoring case", state: sent, sans: []string{"CC.cf-prod.example.com"}},
		{name: "DNS SAN by wildcard", state: sent, sans: []string{"*.cf-prod.example.com"}},
		{name: "wildcard covers one label only", state: sent, sans: []string{"*.example.com"}, want: &ClientCertMismatchError{}},
		{name: "URI SAN", state: sent, sans: []string{"spiffe://cf-prod/cloud-controller"}},
		{name: "email SAN, domain ignoring case", state: sent, sans: []string{"cc@cf.example.com"}},
		{name: "IP SAN", state: sent, sans: []string{"10.0.0.7"}},
		{name: "no SAN fits", state: sent, sans: []string{"spiffe://cf-dev/cloud-controller", "10.0.0.8"}, want: &ClientCertMismatchError{}},
		{name: "subject and SAN both needed", state: sent, subjects: []string{"O=cf-prod"}, sans: []string{"cc.cf-dev.example.com"}, want: &ClientCertMismatchError{}},
		{name: "subject and SAN both fit", state: sent, subjects: []string{"O=cf-prod"}, sans: []string{"cc.cf-prod.example.com"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rule := mustRule(t, config.ClientCert{Mode: config.ClientCertRequired, Subjects: tc.subjects, SANs: tc.sans})
			err := MatchClientCert(tc.state, rule)
			var mismatch *ClientCertMismatchError
			switch want := tc.want; {
			case errors.As(want, &mismatch):
				if !errors.As(err, &mismatch) {
					t.Fatalf("MatchClientCert = %v, want a *ClientCertMismatchError", err)
				}
				if mismatch.Subject == "" || len(mismatch.SANs) != 4 {
					t.Errorf("mismatch error does not describe the certificate: %+v", mismatch)
				}
			case !errors.Is(err, want) || (want == nil) != (err == nil):
				t.Errorf("MatchClientCert = %v, want %v", err, want)
			}
		})
	}
}

func TestPasswordNeeded(t *testing.T) {
	ca := osbtest.NewCA("client CA")
	cc := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller"}})
	other := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "someone-else"}})
	states := []struct {
		name  string
		state *cryptotls.ConnectionState
	}{{"none", nil}, {"matching", verified(cc, ca)}, {"other", verified(other, ca)}}
	type outcome struct {
		password bool
		refused  bool
	}
	want := map[string][3]outcome{ // per mode: none, matching, other
		config.ClientCertOff:        {{true, false}, {true, false}, {true, false}},
		config.ClientCertOptional:   {{true, false}, {true, false}, {false, true}},
		config.ClientCertRequired:   {{false, true}, {true, false}, {false, true}},
		config.ClientCertSufficient: {{true, false}, {false, false}, {false, true}},
	}
	for mode, outcomes := range want {
		rule := mustRule(t, config.ClientCert{Mode: mode, Subjects: []string{"CN=cloud-controller"}})
		for i, st := range states {
			t.Run(mode+"/"+st.name, func(t *testing.T) {
				password, err := rule.PasswordNeeded(st.state)
				if got := (outcome{password, err != nil}); got != outcomes[i] {
					t.Errorf("PasswordNeeded = %v, %v; want password %v, refused %v", password, err, outcomes[i].password, outcomes[i].refused)
				}
			})
		}
	}
	if password, err := (ClientCertRule{}).PasswordNeeded(nil); !password || err != nil {
		t.Errorf("zero rule: %v, %v; want the password to decide", password, err)
	}
}

// TestClientCertHandshake makes real handshakes with listen.tls.
// client_ca_file set: the listener asks for a certificate, verifies one
// that is sent, refuses one from another CA, and lets clients without one
// through to the auth stage.
func TestClientCertHandshake(t *testing.T) {
	serverCA, clientCA, strangerCA := osbtest.NewCA("server CA"), osbtest.NewCA("client CA"), osbtest.NewCA("stranger CA")
	dir := t.TempDir()
	srvCert := serverCA.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}})
	c := config.ListenTLS{Mode: config.TLSModeFiles, CertFile: osbtest.WriteFile(t, dir, "tls.crt", srvCert.CertPEM),
		KeyFile: osbtest.WriteFile(t, dir, "tls.key", srvCert.KeyPEM), ClientCAFile: osbtest.WriteFile(t, dir, "clients.pem", clientCA.PEM)}
	s, err := NewServer(c, "127.0.0.1:0", Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	rule := mustRule(t, config.ClientCert{Mode: config.ClientCertSufficient, Subjects: []string{"CN=cloud-controller"}})
	addr := serveTLS(t, s, listen(t), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		password, err := rule.PasswordNeeded(r.TLS)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case password:
			_, _ = io.WriteString(w, "password needed")
		default:
			_, _ = io.WriteString(w, "authenticated by certificate")
		}
	}))

	cc := clientCA.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller"}})
	wrongName := clientCA.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "intruder"}})
	stranger := strangerCA.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller"}})
	tests := []struct {
		name      string
		certs     []cryptotls.Certificate
		wantCode  int
		wantBody  string
		wantError bool
	}{
		{name: "no certificate", wantCode: 200, wantBody: "password needed"},
		{name: "matching certificate", certs: []cryptotls.Certificate{cc.TLS}, wantCode: 200, wantBody: "authenticated by certificate"},
		{name: "verified but not the tenant's", certs: []cryptotls.Certificate{wrongName.TLS}, wantCode: 401},
		{name: "from another CA", certs: []cryptotls.Certificate{stranger.TLS}, wantError: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cl := client(serverCA.Pool(), addr, tc.certs...)
			defer cl.CloseIdleConnections()
			res, err := cl.Get("https://gw.test/")
			if tc.wantError {
				if err == nil {
					res.Body.Close()
					t.Fatalf("request succeeded with status %d, want the handshake refused", res.StatusCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tc.wantCode || (tc.wantBody != "" && string(body) != tc.wantBody) {
				t.Errorf("got %d %q, want %d %q", res.StatusCode, body, tc.wantCode, tc.wantBody)
			}
		})
	}
}
