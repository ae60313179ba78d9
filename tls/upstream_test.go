package tls

import (
	cryptotls "crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestUpstream(t *testing.T) {
	dir := t.TempDir()
	ca := osbtest.NewCA("broker CA")
	caCert := osbtest.WriteFile(t, dir, "ca.pem", ca.PEM)
	clientCert, clientKey := ca.Issue(osbtest.CertSpec{Client: true}).WriteFiles(t, dir, "client.crt", "client.key")
	_, otherKey := ca.Issue(osbtest.CertSpec{Client: true}).WriteFiles(t, dir, "other.crt", "other.key")
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

func TestUpstreamVersionAndVerify(t *testing.T) {
	tests := []struct {
		name     string
		in       config.UpstreamTLS
		wantMin  uint16
		insecure bool
		wantErr  string
	}{
		{name: "default", in: config.UpstreamTLS{}, wantMin: cryptotls.VersionTLS12},
		{name: "1.2", in: config.UpstreamTLS{MinVersion: "1.2"}, wantMin: cryptotls.VersionTLS12},
		{name: "1.3", in: config.UpstreamTLS{MinVersion: "1.3"}, wantMin: cryptotls.VersionTLS13},
		{name: "unknown version", in: config.UpstreamTLS{MinVersion: "1.1"}, wantErr: `min_version "1.1"`},
		{name: "verification off", in: config.UpstreamTLS{InsecureSkipVerify: true}, wantMin: cryptotls.VersionTLS12, insecure: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Upstream(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.MinVersion != tc.wantMin || got.InsecureSkipVerify != tc.insecure {
				t.Errorf("MinVersion %s, InsecureSkipVerify %v; want %s, %v", cryptotls.VersionName(got.MinVersion),
					got.InsecureSkipVerify, cryptotls.VersionName(tc.wantMin), tc.insecure)
			}
		})
	}
}

// TestUpstreamHandshake dials a TLS 1.2-only broker: refused with
// min_version 1.3, accepted with 1.2, and accepted without its CA only
// when verification is off.
func TestUpstreamHandshake(t *testing.T) {
	ca := osbtest.NewCA("broker CA")
	cert := ca.Issue(osbtest.CertSpec{DNS: []string{"broker.test"}})
	ln := listen(t)
	srv := &http.Server{Handler: okHandler, TLSConfig: &cryptotls.Config{Certificates: []cryptotls.Certificate{cert.TLS},
		MaxVersion: cryptotls.VersionTLS12}, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { srv.Close() })
	caFile := osbtest.WriteFile(t, t.TempDir(), "ca.PEM", ca.PEM)

	tests := []struct {
		name string
		in   config.UpstreamTLS
		ok   bool
	}{
		{"trusted, TLS 1.2", config.UpstreamTLS{CAFile: caFile, ServerName: "broker.test", MinVersion: "1.2"}, true},
		{"trusted, but min_version 1.3", config.UpstreamTLS{CAFile: caFile, ServerName: "broker.test", MinVersion: "1.3"}, false},
		{"untrusted", config.UpstreamTLS{ServerName: "broker.test"}, false},
		{"untrusted, verification off", config.UpstreamTLS{ServerName: "broker.test", InsecureSkipVerify: true}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tlsConf, err := Upstream(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf}}
			res, err := c.Get("https://" + ln.Addr().String() + "/")
			if err == nil {
				res.Body.Close()
			}
			if (err == nil) != tc.ok {
				t.Errorf("request error %v, want success %v", err, tc.ok)
			}
		})
	}
}
