package tls

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"log"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"
)

// Pebble, Let's Encrypt's ACME test server, runs in-process for the ACME
// tests. Its settings come from the environment and are read when its
// parts are built, so TestMain sets them once for every test.
func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"PEBBLE_VA_NOSLEEP":      "1", // validate at once, not after up to 15 s
		"PEBBLE_WFE_NONCEREJECT": "0", // no random badNonce errors to retry
	} {
		os.Setenv(k, v)
	}
	os.Exit(m.Run())
}

// pebble is a running in-process Pebble.
type pebble struct {
	// directory is the ACME directory URL.
	directory string
	// serverRoot is a PEM file with the root of Pebble's own HTTPS
	// certificate: listen.tls.ca_root.
	serverRoot string
	// roots holds the root that Pebble's issued certificates chain to,
	// which the tests' clients trust.
	roots *x509.CertPool
}

// startPebble runs Pebble on loopback until the test ends. Its validation
// authority really connects for each challenge: to httpPort for HTTP-01
// and tlsPort for TLS-ALPN-01, at the address a DNS server of the test's
// own gives every name, 127.0.0.1. Certificates are valid for validity
// seconds (0: Pebble's default, 90 days).
func startPebble(t *testing.T, httpPort, tlsPort int, validity uint64) *pebble {
	t.Helper()
	logs := &syncBuffer{}
	logger := log.New(logs, "pebble ", log.Lmicroseconds)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Pebble's log:\n%s", logs.String())
		}
	})
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "test", ValidityPeriod: validity},
	})
	validator := va.New(logger, httpPort, tlsPort, false, startDNS(t), store)
	frontend := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewTLSServer(frontend.Handler())
	t.Cleanup(srv.Close)

	p := &pebble{directory: srv.URL + wfe.DirectoryPath, roots: x509.NewCertPool()}
	p.serverRoot = filepath.Join(t.TempDir(), "pebble-server-root.pem")
	serverCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.serverRoot, serverCert, 0o600); err != nil {
		t.Fatal(err)
	}
	p.roots.AddCert(authority.GetRootCert(0).Cert)
	return p
}

// startDNS serves DNS over TCP on loopback, as Pebble's validation
// authority asks it: every A query gets 127.0.0.1, every other nothing.
func startDNS(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, question := range q.Question {
			if question.Qtype == dns.TypeA {
				m.Answer = append(m.Answer, &dns.A{A: net.IPv4(127, 0, 0, 1),
					Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET}})
			}
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// syncBuffer is a bytes.Buffer safe for concurrent writers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
