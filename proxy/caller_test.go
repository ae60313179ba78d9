package proxy

import (
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

func TestForwardedFor(t *testing.T) {
	trusted := core.Proxies{}
	for _, s := range []string{"10.0.0.0/8", "192.0.2.10", "fd00::/8"} {
		p := config.Listen{TrustedProxies: []string{s}}.TrustedProxyPrefixes()
		if len(p) != 1 {
			t.Fatalf("%s does not parse", s)
		}
		trusted = append(trusted, p[0])
	}
	tests := []struct {
		name   string
		peer   string
		xff    []string
		want   string
		noneOf core.Proxies // nil: trusted
	}{
		{"peer not trusted", "198.51.100.1:4000", []string{"203.0.113.7"}, "", nil},
		{"no proxies configured", "10.0.0.1:4000", []string{"203.0.113.7"}, "", core.Proxies{}},
		{"trusted peer, one client", "10.0.0.1:4000", []string{"203.0.113.7"}, "203.0.113.7", nil},
		{"no header", "10.0.0.1:4000", nil, "", nil},
		{"rightmost untrusted wins over a forged left", "10.0.0.1:4000", []string{"1.1.1.1, 203.0.113.7, 10.0.0.2"}, "203.0.113.7", nil},
		{"several header lines read as one list", "10.0.0.1:4000", []string{"1.1.1.1, 203.0.113.7", "192.0.2.10"}, "203.0.113.7", nil},
		{"all trusted: the leftmost", "10.0.0.1:4000", []string{"10.1.1.1, 10.2.2.2"}, "10.1.1.1", nil},
		{"garbage stops the walk", "10.0.0.1:4000", []string{"203.0.113.7, not-an-ip, 10.0.0.2"}, "", nil},
		{"entry with a port", "10.0.0.1:4000", []string{"203.0.113.7:5123"}, "203.0.113.7", nil},
		{"IPv6 entry with a port", "10.0.0.1:4000", []string{"[2001:db8::7]:5123"}, "2001:db8::7", nil},
		{"IPv6 peer and entry", "[fd00::1]:4000", []string{"2001:db8::7 , fd00::2"}, "2001:db8::7", nil},
		{"IPv4-mapped peer", "[::ffff:10.0.0.1]:4000", []string{"203.0.113.7"}, "203.0.113.7", nil},
		{"empty entries skipped", "10.0.0.1:4000", []string{"203.0.113.7,, "}, "203.0.113.7", nil},
		{"zone refused", "10.0.0.1:4000", []string{"fe80::1%eth0"}, "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := trusted
			if tc.noneOf != nil {
				p = tc.noneOf
			}
			r := httptest.NewRequest("GET", "/", nil)
			r.RemoteAddr = tc.peer
			for _, v := range tc.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			if got := p.ForwardedFor(r); got != tc.want {
				t.Errorf("forwardedFor = %q, want %q", got, tc.want)
			}
		})
	}
	for remote, want := range map[string]string{"192.0.2.1:80": "192.0.2.1", "[2001:db8::1]:443": "2001:db8::1", "pipe": "pipe"} {
		if got := core.PeerAddr(remote); got != want {
			t.Errorf("peerAddr(%q) = %q, want %q", remote, got, want)
		}
	}
}

// callerYAML fronts a broker with a tenant of two credentials, from
// behind a trusted load balancer (loopback, as the test's client is).
const callerYAML = `
admin: {address: "off"}
listen: {trusted_proxies: ["127.0.0.1", "10.0.0.0/8"]}
brokers:
  - name: b
    url: ${SAMPLE_URL}
    username: sample
    password: sample-secret
tenants:
  - name: t1
    credentials: [{username: cc-old, password: old-pass-000000}, {username: cc, password: t1-pass-0000000}]
    routes: [{broker: b, prefix: /t1/b}]
`

// TestCallerInAccessLogAndAudit: the access line and the audit record
// name the peer, the client behind the trusted proxy, the credential's
// username (a refused one's only when it is the tenant's), the client
// certificate's subject and the trace id; never a password.
func TestCallerInAccessLogAndAudit(t *testing.T) {
	broker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"services":[]}`))
	}))
	t.Cleanup(broker.Close)
	ca := osbtest.NewCA("client CA")
	cfg, err := config.Parse([]byte(callerYAML+"\n"), config.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"SAMPLE_URL": broker.URL}[k], k == "SAMPLE_URL"
	}})
	if err != nil {
		t.Fatal(err)
	}
	var logBuf osbtest.Buffer
	rw := &recordingWriter{}
	gw, err := New(cfg, Options{AccessLog: NewAccessLog(&logBuf, "json", nil), Audit: &AuditOptions{Writer: rw}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(gw)
	srv.TLS = &tls.Config{ClientCAs: ca.Pool(), ClientAuth: tls.VerifyClientCertIfGiven}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := srv.Client()
	tr := client.Transport.(*http.Transport).Clone()
	cert := ca.Issue(osbtest.CertSpec{Client: true, Subject: pkix.Name{CommonName: "cloud-controller", Organization: []string{"example"}}})
	tr.TLSClientConfig.Certificates = []tls.Certificate{cert.TLS}
	withCert := &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)

	const secretUser = "hunter2-typed-into-the-username-field"
	const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	calls := []struct {
		client     *http.Client
		user, pass string
		xff        string
		tp         string
		status     int
	}{
		{client, "cc", "t1-pass-0000000", "203.0.113.7, 10.0.0.2", traceparent, 200},
		{client, "cc-old", "wrong-password", "", "", 401},
		{client, secretUser, "whatever", "", "", 401},
		{withCert, "cc", "t1-pass-0000000", "", "", 200},
	}
	for i, c := range calls {
		req, _ := http.NewRequest("GET", srv.URL+"/t1/b/v2/catalog", nil)
		req.SetBasicAuth(c.user, c.pass)
		req.Header.Set("X-Broker-API-Version", "2.17")
		req.Header.Set("X-Broker-API-Request-Identity", "req-"+string(rune('a'+i)))
		if c.xff != "" {
			req.Header.Set("X-Forwarded-For", c.xff)
		}
		if c.tp != "" {
			req.Header.Set("Traceparent", c.tp)
		}
		res, err := c.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != c.status {
			t.Fatalf("call %d: status %d, want %d", i, res.StatusCode, c.status)
		}
	}

	type who struct{ ClientAddr, ForwardedFor, Username, ClientCertSubject, TraceID string }
	want := []who{
		{"127.0.0.1", "203.0.113.7", "cc", "", "4bf92f3577b34da6a3ce929d0e0e4736"},
		{"127.0.0.1", "", "cc-old", "", ""},
		{"127.0.0.1", "", "", "", ""},
		{"127.0.0.1", "", "cc", "CN=cloud-controller,O=example", ""},
	}
	text, _ := logBuf.Snapshot()
	var logged []who
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var l struct {
			ClientAddr        string `json:"client_addr"`
			ForwardedFor      string `json:"forwarded_for"`
			Username          string `json:"username"`
			ClientCertSubject string `json:"client_cert_subject"`
			TraceID           string `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("access line %q: %v", line, err)
		}
		logged = append(logged, who(l))
	}
	if diff := cmp.Diff(want, logged); diff != "" {
		t.Errorf("access lines (-want +got):\n%s", diff)
	}
	rw.mu.Lock()
	var audited []who
	for _, r := range rw.recs {
		audited = append(audited, who{r.ClientAddr, r.ForwardedFor, r.Username, r.ClientCertSubject, r.TraceID})
	}
	recs := append([]audit.Record(nil), rw.recs...)
	rw.mu.Unlock()
	if diff := cmp.Diff(want, audited); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
	all, _ := json.Marshal(recs)
	for _, secret := range []string{secretUser, "t1-pass-0000000", "wrong-password", "old-pass-000000"} {
		if strings.Contains(text, secret) || bytes.Contains(all, []byte(secret)) {
			t.Errorf("%q reached the access log or the audit records", secret)
		}
	}
}
