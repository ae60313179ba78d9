// This file builds the targets of the two request kinds run only when
// -requests names them, both GET last_operation passed through to the
// sample broker:
//
//   - tls: the gateway behind targetGateway served on a second plain
//     listener (gateway http) and on a TLS listener (gateway https: TLS 1.2
//     or later with an ECDSA P-256 certificate from a test CA made in memory,
//     HTTP/1.1 keep-alive). The load generator trusts the CA and
//     keeps its connections, so each connection makes one handshake; both
//     servers count the connections they accept.
//   - tracing: three more gateways, one with every observing stage left out
//     (all off) and two with tracing, metrics and the audit log (file sink
//     in a temporary directory, fsync interval) on, sampling new traces at
//     1% and at 100% into a real batch span processor whose exporter counts
//     and discards the spans.

package main

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
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
	serverConf, clientConf := serverTLS()
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

// serverTLS issues an ECDSA P-256 certificate for 127.0.0.1 from a test
// CA made in memory and returns a server configuration that serves it
// (TLS 1.2 or later, HTTP/1.1) and a client configuration that trusts the
// CA.
func serverTLS() (server, client *tls.Config) {
	ca := osbtest.NewCA("loadbench CA")
	cert := ca.Issue(osbtest.CertSpec{Subject: pkix.Name{CommonName: "loadbench"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, DNS: []string{"localhost"}})
	server = &tls.Config{Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	client = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}
	return server, client
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
