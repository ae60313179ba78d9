// Package pebbletest runs Pebble, Let's Encrypt's ACME test server, in
// the test's own process, for tests that obtain real certificates over
// loopback: Pebble's validation authority really connects to the ports it
// is given for each HTTP-01 and TLS-ALPN-01 challenge, at 127.0.0.1, which
// a small DNS server of its own answers for every name.
//
// It is for tests only.
package pebbletest

import (
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
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// Options say where Pebble's validation authority connects and how long
// the certificates it issues are valid.
type Options struct {
	// HTTPPort is where HTTP-01 challenges are fetched; 0 when unused.
	HTTPPort int
	// TLSPort is where TLS-ALPN-01 challenges are checked; 0 when unused.
	TLSPort int
	// Validity is how long issued certificates are valid, in seconds; 0
	// means Pebble's default, 90 days.
	Validity uint64
}

// Pebble is a running in-process Pebble.
type Pebble struct {
	// Directory is the ACME directory URL (listen.tls.ca).
	Directory string
	// ServerRoot is a PEM file with the root of Pebble's own HTTPS
	// certificate (listen.tls.ca_root).
	ServerRoot string
	// Roots holds the root that issued certificates chain to, for clients.
	Roots *x509.CertPool
}

// envOnce sets the environment Pebble reads when its parts are built.
var envOnce sync.Once

// Start runs Pebble on loopback until the test ends; its log is shown if
// the test fails. The first call sets PEBBLE_VA_NOSLEEP=1 (validate at
// once, not after up to 15 s) and PEBBLE_WFE_NONCEREJECT=0 (no random
// badNonce errors) in the process environment, where Pebble reads them.
func Start(t testing.TB, o Options) *Pebble {
	t.Helper()
	envOnce.Do(func() {
		os.Setenv("PEBBLE_VA_NOSLEEP", "1")
		os.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	})
	logs := &osbtest.Buffer{}
	logger := log.New(logs, "pebble ", log.Lmicroseconds)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Pebble's log:\n%s", logs.String())
		}
	})
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1, map[string]ca.Profile{
		"default": {Description: "test", ValidityPeriod: o.Validity},
	})
	validator := va.New(logger, o.HTTPPort, o.TLSPort, false, startDNS(t), store)
	frontend := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewTLSServer(frontend.Handler())
	t.Cleanup(srv.Close)

	p := &Pebble{Directory: srv.URL + wfe.DirectoryPath, Roots: x509.NewCertPool()}
	p.ServerRoot = filepath.Join(t.TempDir(), "pebble-server-root.pem")
	serverCert := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.ServerRoot, serverCert, 0o600); err != nil {
		t.Fatal(err)
	}
	p.Roots.AddCert(authority.GetRootCert(0).Cert)
	return p
}

// startDNS serves DNS over TCP on loopback, as Pebble's validation
// authority asks it: every A query gets 127.0.0.1, every other nothing.
func startDNS(t testing.TB) string {
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
