package tls

import (
	"crypto/x509/pkix"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestCheckFiles(t *testing.T) {
	now := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	ca := osbtest.NewCA("check CA")
	dir := t.TempDir()
	spec := func(from, until time.Time, dns ...string) osbtest.CertSpec {
		return osbtest.CertSpec{Subject: pkix.Name{CommonName: "gw"}, DNS: dns, NotBefore: from, NotAfter: until}
	}
	good := ca.Issue(spec(now.AddDate(0, -1, 0), now.AddDate(1, 0, 0), "gw.example.com", "*.tenants.example.com"))
	soon := ca.Issue(spec(now.AddDate(0, -2, 0), now.AddDate(0, 0, 10), "gw.example.com"))
	expired := ca.Issue(spec(now.AddDate(-1, 0, 0), now.AddDate(0, 0, -1), "gw.example.com"))
	future := ca.Issue(spec(now.AddDate(0, 0, 1), now.AddDate(1, 0, 0), "gw.example.com"))
	w := func(name string, data []byte) string { return osbtest.WriteFile(t, dir, name, data) }
	goodCert, goodKey, soonCert, soonKey := w("good.crt", good.CertPEM), w("good.key", good.KeyPEM), w("soon.crt", soon.CertPEM), w("soon.key", soon.KeyPEM)
	expiredCert, expiredKey, futureCert, futureKey := w("expired.crt", expired.CertPEM), w("expired.key", expired.KeyPEM), w("future.crt", future.CertPEM), w("future.key", future.KeyPEM)
	notPEM, missing := w("not.pem", []byte("hello")), filepath.Join(dir, "missing.pem")

	files := func(cert, key string, domains ...string) *config.Config {
		return &config.Config{Listen: config.Listen{TLS: config.ListenTLS{Mode: config.TLSModeFiles, CertFile: cert, KeyFile: key, Domains: domains}}}
	}
	const day = "2006-01-02 15:04 MST"
	tests := []struct {
		name string
		cfg  *config.Config
		want []Finding
	}{
		{name: "valid pair covering its domains", cfg: files(goodCert, goodKey, "gw.example.com", "a.tenants.example.com", "*.tenants.example.com")},
		{name: "mode acme: files not looked at", cfg: &config.Config{Listen: config.Listen{TLS: config.ListenTLS{Mode: config.TLSModeACME, CertFile: missing}}}},
		{name: "domain not covered", cfg: files(goodCert, goodKey, "osb.example.com", "a.b.tenants.example.com", "*.example.com"), want: []Finding{
			{"listen.tls.domains[0]", SeverityError, `"osb.example.com" is not covered by the certificate in cert_file (it covers DNS:gw.example.com, DNS:*.tenants.example.com)`},
			{"listen.tls.domains[1]", SeverityError, `"a.b.tenants.example.com" is not covered by the certificate in cert_file (it covers DNS:gw.example.com, DNS:*.tenants.example.com)`},
			{"listen.tls.domains[2]", SeverityError, `"*.example.com" is not covered by the certificate in cert_file (it covers DNS:gw.example.com, DNS:*.tenants.example.com)`},
		}},
		{name: "key of another certificate", cfg: files(goodCert, soonKey), want: []Finding{
			{"listen.tls.key_file", SeverityError, "the key in " + soonKey + " does not belong to the certificate in " + goodCert + ` ("CN=gw")`},
		}},
		{name: "expires within 30 days", cfg: files(soonCert, soonKey), want: []Finding{
			{"listen.tls.cert_file", SeverityWarning, soonCert + `: certificate "CN=gw" expires on ` + soon.Leaf.NotAfter.UTC().Format(day) + ", in 10 days"},
		}},
		{name: "expired", cfg: files(expiredCert, expiredKey), want: []Finding{
			{"listen.tls.cert_file", SeverityError, expiredCert + `: certificate "CN=gw" expired on ` + expired.Leaf.NotAfter.UTC().Format(day)},
		}},
		{name: "not yet valid", cfg: files(futureCert, futureKey), want: []Finding{
			{"listen.tls.cert_file", SeverityError, futureCert + `: certificate "CN=gw" is not valid before ` + future.Leaf.NotBefore.UTC().Format(day)},
		}},
		{name: "unreadable and not PEM", cfg: files(missing, notPEM), want: []Finding{
			{"listen.tls.cert_file", SeverityError, "cannot read " + missing + ": no such file or directory"},
		}},
		{name: "key file without a key", cfg: files(goodCert, notPEM), want: []Finding{
			{"listen.tls.key_file", SeverityError, notPEM + " holds no PEM private key"},
		}},
		{name: "bundles and broker client certificates", cfg: &config.Config{
			Listen: config.Listen{TLS: config.ListenTLS{Mode: config.TLSModeOnDemand, ClientCAFile: notPEM, CARoot: soonCert}},
			Brokers: []config.Broker{{Name: "a", TLS: config.UpstreamTLS{CAFile: missing, CertFile: expiredCert, KeyFile: expiredKey}},
				{Name: "b", TLS: config.UpstreamTLS{CAFile: goodCert, CertFile: goodCert, KeyFile: goodKey}}},
		}, want: []Finding{
			{"listen.tls.client_ca_file", SeverityError, notPEM + " holds no PEM certificate"},
			{"listen.tls.ca_root", SeverityWarning, soonCert + `: certificate "CN=gw" expires on ` + soon.Leaf.NotAfter.UTC().Format(day) + ", in 10 days"},
			{"brokers[0].tls.ca_file", SeverityError, "cannot read " + missing + ": no such file or directory"},
			{"brokers[0].tls.cert_file", SeverityError, expiredCert + `: certificate "CN=gw" expired on ` + expired.Leaf.NotAfter.UTC().Format(day)},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := CheckFiles(tc.cfg, now)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("CheckFiles (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFindingString(t *testing.T) {
	for _, tc := range []struct {
		f    Finding
		want string
	}{
		{Finding{"listen.tls.cert_file", SeverityError, "expired"}, "listen.tls.cert_file: expired"},
		{Finding{"listen.tls.cert_file", SeverityWarning, "expires soon"}, "listen.tls.cert_file: warning: expires soon"},
	} {
		if got := tc.f.String(); got != tc.want {
			t.Errorf("String() = %q, want %q", got, tc.want)
		}
	}
}

func TestWarnings(t *testing.T) {
	off := func(addr string) *config.Config {
		return &config.Config{Listen: config.Listen{Address: addr, TLS: config.ListenTLS{Mode: config.TLSModeOff}}}
	}
	plain := func(addr string) string {
		return "listen.tls.mode: off: the platform listener " + addr + " speaks plain HTTP beyond loopback, so platform credentials " +
			"cross the network readable; set listen.tls.mode, or terminate TLS in front of the gateway and keep the listener on a private network"
	}
	insecure := off("127.0.0.1:8080")
	insecure.Brokers = []config.Broker{{Name: "a"}, {Name: "legacy", TLS: config.UpstreamTLS{InsecureSkipVerify: true}}}
	tests := []struct {
		name string
		cfg  *config.Config
		want []string
	}{
		{"loopback IPv4", off("127.0.0.1:8080"), nil},
		{"loopback IPv6", off("[::1]:8080"), nil},
		{"localhost", off("localhost:8080"), nil},
		{"every interface", off(":8080"), []string{plain(":8080")}},
		{"a private address is not loopback", off("10.0.0.5:8080"), []string{plain("10.0.0.5:8080")}},
		{"TLS on", &config.Config{Listen: config.Listen{Address: ":8443", TLS: config.ListenTLS{Mode: config.TLSModeFiles}}}, nil},
		{"broker not verified", insecure, []string{`brokers[1].tls.insecure_skip_verify: the certificate of broker "legacy" is not verified; ` +
			"anyone on the path can pose as the broker and read the credentials sent to it"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Warnings(tc.cfg)); diff != "" {
				t.Errorf("Warnings (-want +got):\n%s", diff)
			}
		})
	}
}
