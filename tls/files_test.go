package tls

import (
	cryptotls "crypto/tls"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// filesServer serves okHandler from certificate files in dir, polling
// them every interval.
func filesServer(t *testing.T, cert osbtest.Cert, interval time.Duration, extra func(*config.ListenTLS)) (addr, dir string, s *Server) {
	t.Helper()
	dir = t.TempDir()
	c := config.ListenTLS{Mode: config.TLSModeFiles, MinVersion: "1.2", ReloadInterval: interval,
		CertFile: osbtest.WriteFile(t, dir, "tls.crt", cert.CertPEM), KeyFile: osbtest.WriteFile(t, dir, "tls.key", cert.KeyPEM)}
	if extra != nil {
		extra(&c)
	}
	s, err := NewServer(c, "127.0.0.1:0", Options{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	return serveTLS(t, s, listen(t), okHandler), dir, s
}

// get requests https://gw.test/ through c and returns the serial of the
// certificate the connection was made with.
func get(t *testing.T, c *http.Client) (*big.Int, *http.Response) {
	t.Helper()
	res, err := c.Get("https://gw.test/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if b, _ := io.ReadAll(res.Body); res.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("GET: %d %q", res.StatusCode, b)
	}
	return res.TLS.PeerCertificates[0].SerialNumber, res
}

// TestFilesReplacedMidRun replaces the certificate files while a
// keep-alive connection is open: new handshakes get the new certificate,
// the open connection goes on working with the old one.
func TestFilesReplacedMidRun(t *testing.T) {
	ca := osbtest.NewCA("files CA")
	first, second := ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}}), ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}})
	addr, dir, _ := filesServer(t, first, 20*time.Millisecond, nil)

	kept := client(ca.Pool(), addr)
	serial, res := get(t, kept)
	if serial.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Fatalf("served serial %v, want the first certificate's %v", serial, first.Leaf.SerialNumber)
	}
	if res.ProtoMajor != 2 {
		t.Errorf("protocol %s, want HTTP/2", res.Proto)
	}

	osbtest.WriteFile(t, dir, "tls.key", second.KeyPEM) // a key without its certificate must not be served
	osbtest.WriteFile(t, dir, "tls.crt", second.CertPEM)
	deadline := time.Now().Add(5 * time.Second)
	for {
		fresh := client(ca.Pool(), addr)
		serial, _ := get(t, fresh)
		fresh.CloseIdleConnections()
		if serial.Cmp(second.Leaf.SerialNumber) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections still get serial %v after 5s", serial)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if serial, _ := get(t, kept); serial.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Errorf("the kept-alive connection now shows serial %v; want it to go on with %v", serial, first.Leaf.SerialNumber)
	}
}

// TestFilesReload is SIGHUP's path: Reload reads the files at once; a pair
// that does not fit leaves the previous one in service.
func TestFilesReload(t *testing.T) {
	ca := osbtest.NewCA("files CA")
	first, second, third := ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}}), ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}}),
		ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}})
	addr, dir, s := filesServer(t, first, time.Hour, nil)
	serialNow := func() *big.Int {
		c := client(ca.Pool(), addr)
		defer c.CloseIdleConnections()
		serial, _ := get(t, c)
		return serial
	}

	osbtest.WriteFile(t, dir, "tls.crt", second.CertPEM)
	osbtest.WriteFile(t, dir, "tls.key", third.KeyPEM)
	if err := s.Reload(); err == nil || !strings.Contains(err.Error(), "private key does not match") {
		t.Errorf("Reload of a mismatched pair = %v, want a key mismatch error", err)
	}
	if got := serialNow(); got.Cmp(first.Leaf.SerialNumber) != 0 {
		t.Errorf("after a refused reload serial %v is served, want the previous %v", got, first.Leaf.SerialNumber)
	}
	osbtest.WriteFile(t, dir, "tls.key", second.KeyPEM)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if got := serialNow(); got.Cmp(second.Leaf.SerialNumber) != 0 {
		t.Errorf("after Reload serial %v is served, want %v", got, second.Leaf.SerialNumber)
	}
}

// TestMinVersion makes handshakes with each client version against both
// listener minimums.
func TestMinVersion(t *testing.T) {
	ca := osbtest.NewCA("files CA")
	cert := ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}})
	addrs := map[string]string{}
	for _, min := range []string{"1.2", "1.3"} {
		addrs[min], _, _ = filesServer(t, cert, time.Hour, func(c *config.ListenTLS) { c.MinVersion = min })
	}
	tests := []struct {
		name      string
		listener  string
		client    uint16
		wantError bool
	}{
		{"TLS 1.1 client refused", "1.2", cryptotls.VersionTLS11, true},
		{"TLS 1.2 client accepted", "1.2", cryptotls.VersionTLS12, false},
		{"TLS 1.3 client accepted", "1.2", cryptotls.VersionTLS13, false},
		{"TLS 1.2 client refused by min_version 1.3", "1.3", cryptotls.VersionTLS12, true},
		{"TLS 1.3 client accepted by min_version 1.3", "1.3", cryptotls.VersionTLS13, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := cryptotls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addrs[tc.listener], &cryptotls.Config{
				ServerName: "gw.test", RootCAs: ca.Pool(), MinVersion: cryptotls.VersionTLS10, MaxVersion: tc.client})
			if tc.wantError {
				if err == nil {
					conn.Close()
					t.Fatal("handshake succeeded, want it refused")
				}
				if !strings.Contains(err.Error(), "protocol version not supported") {
					t.Errorf("handshake error %q, want the server's protocol version alert", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("handshake: %v", err)
			}
			defer conn.Close()
			if got := conn.ConnectionState().Version; got != tc.client {
				t.Errorf("negotiated %s, want %s", cryptotls.VersionName(got), cryptotls.VersionName(tc.client))
			}
		})
	}
}

func TestNewServerErrors(t *testing.T) {
	ca := osbtest.NewCA("files CA")
	dir := t.TempDir()
	good := ca.Issue(osbtest.CertSpec{Subject: pkix.Name{CommonName: "gw"}, DNS: []string{"gw.test"}})
	other := ca.Issue(osbtest.CertSpec{DNS: []string{"gw.test"}})
	certFile, keyFile := osbtest.WriteFile(t, dir, "a.crt", good.CertPEM), osbtest.WriteFile(t, dir, "a.key", good.KeyPEM)
	otherKey := osbtest.WriteFile(t, dir, "b.key", other.KeyPEM)
	tests := []struct {
		name string
		c    config.ListenTLS
		want string
	}{
		{"missing certificate", config.ListenTLS{Mode: "files", CertFile: dir + "/none.crt", KeyFile: keyFile}, "no such file"},
		{"key of another certificate", config.ListenTLS{Mode: "files", CertFile: certFile, KeyFile: otherKey}, "private key does not match"},
		{"client CA without PEM", config.ListenTLS{Mode: "files", CertFile: certFile, KeyFile: keyFile, ClientCAFile: keyFile}, "client_ca_file:"},
		{"private ACME root missing", config.ListenTLS{Mode: "acme", CARoot: dir + "/none.pem"}, "ca_root:"},
		{"unknown mode", config.ListenTLS{Mode: "manual"}, `unknown listen.tls.mode "manual"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := NewServer(tc.c, "127.0.0.1:0", Options{Logger: quietLog})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("NewServer error = %v, want one containing %q", err, tc.want)
			}
		})
	}
	off, err := NewServer(config.ListenTLS{}, ":8080", Options{})
	if err != nil || off.Config() != nil || off.Mode() != config.TLSModeOff {
		t.Errorf("mode off: %v, %v, %q; want no TLS config", err, off.Config(), off.Mode())
	}
	if ln := listen(t); off.Wrap(ln) != ln {
		t.Error("mode off: Wrap changed the listener")
	}
}
