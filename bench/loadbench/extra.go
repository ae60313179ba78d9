// This file builds the targets of the two request kinds run only when
// -requests names them, both GET last_operation passed through to the
// sample broker:
//
//   - tls: the gateway behind targetGateway served on a second plain
//     listener (gateway http) and on a TLS listener (gateway https: TLS 1.2
//     or later with a self-signed ECDSA P-256 certificate made in memory,
//     HTTP/1.1 keep-alive). The load generator trusts the certificate and
//     keeps its connections, so each connection makes one handshake; both
//     servers count the connections they accept.
//   - tracing: three more gateways, one with every observing stage left out
//     (all off) and two with tracing, metrics and the audit log (file sink
//     in a temporary directory, fsync interval) on, sampling new traces at
//     1% and at 100% into a real batch span processor whose exporter counts
//     and discards the spans.

package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"
)

// The extra request kinds, as named by -requests.
const (
	kindTLS     = "tls"     // the gateway over plain HTTP and over TLS
	kindTracing = "tracing" // the gateway with everything off, and on at 1% and 100% sampling
)

// The extra kinds' target names.
const (
	targetHTTP     = "gateway http"
	targetHTTPS    = "gateway https"
	targetAllOff   = "all off"
	targetOn1      = "all on 1%"
	targetOn100    = "all on 100%"
	tracingLowRate = 0.01
)

// startExtra starts the targets of the extra kinds among kinds; it does
// nothing for the others. What it starts stops with e.close.
func (e *env) startExtra(kinds []string) error {
	if slices.Contains(kinds, kindTLS) && e.tlsRun == nil {
		if err := e.startTLS(); err != nil {
			return fmt.Errorf("tls: %w", err)
		}
	}
	if slices.Contains(kinds, kindTracing) && e.tracing == nil {
		if err := e.startTracing(); err != nil {
			return fmt.Errorf("tracing: %w", err)
		}
	}
	if hasProvision(kinds) && e.provision == nil {
		if err := e.startProvision(); err != nil {
			return fmt.Errorf("provision: %w", err)
		}
	}
	if slices.Contains(kinds, kindAuthFlood) && e.authFlood == nil {
		if err := e.startAuthFlood(); err != nil {
			return fmt.Errorf("auth-flood: %w", err)
		}
	}
	return nil
}

// gatewayPath is the gateway's path prefix for the sample broker.
const gatewayPath = "/" + tenantName + "/" + brokerName

// startTLS serves e's gateway on a plain and a TLS listener.
func (e *env) startTLS() error {
	serverConf, clientConf, err := selfSignedTLS()
	if err != nil {
		return err
	}
	var plainConns, tlsConns atomic.Int64
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	e.closers = append(e.closers, serveListener("gateway", e.gateway, ln, func() { plainConns.Add(1) }))
	plain := &target{name: targetHTTP, base: "http://" + ln.Addr().String() + gatewayPath,
		header: platformHeader(), counter: plainConns.Load}
	if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
		return err
	}
	e.closers = append(e.closers, serveListener("gateway", e.gateway, tls.NewListener(ln, serverConf), func() { tlsConns.Add(1) }))
	secure := &target{name: targetHTTPS, base: "https://" + ln.Addr().String() + gatewayPath,
		header: platformHeader(), counter: tlsConns.Load, tls: clientConf}
	e.tlsRun = []*target{plain, secure}
	return nil
}

// selfSignedTLS makes an ECDSA P-256 certificate for 127.0.0.1 and
// returns a server configuration that serves it (TLS 1.2 or later,
// HTTP/1.1) and a client configuration that trusts it.
func selfSignedTLS() (server, client *tls.Config, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(now.UnixNano()),
		Subject:               pkix.Name{CommonName: "loadbench"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		MinVersion:   tls.VersionTLS12,
		NextProtos:   []string{"http/1.1"},
	}
	client = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	return server, client, nil
}

// startTracing starts the tracing kind's three gateways, the audit log's
// directory and their servers.
func (e *env) startTracing() error {
	dir, err := os.MkdirTemp("", "loadbench-audit-")
	if err != nil {
		return err
	}
	e.closers = append(e.closers, func() { _ = os.RemoveAll(dir) })
	e.auditDir = dir
	for _, c := range []struct {
		name string
		o    observe
	}{
		{targetAllOff, observe{off: true}},
		{targetOn1, observe{sampleRatio: tracingLowRate, auditPath: filepath.Join(dir, "audit-1.log")}},
		{targetOn100, observe{sampleRatio: 1, auditPath: filepath.Join(dir, "audit-100.log")}},
	} {
		gw, err := buildGateway(e.urls, c.o)
		if err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
		base, stop, err := serve("gateway", gw.handler)
		if err != nil {
			gw.close()
			return fmt.Errorf("%s: %w", c.name, err)
		}
		e.closers = append(e.closers, func() { stop(); gw.close() })
		e.tracing = append(e.tracing, &target{name: c.name, base: base + gatewayPath,
			header: platformHeader(), counter: gw.spans})
	}
	return nil
}
