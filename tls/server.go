package tls

import (
	"context"
	cryptotls "crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// acmeTLS1 is the ALPN protocol of ACME TLS-ALPN-01 challenges (RFC 8737).
const acmeTLS1 = "acme-tls/1"

// Options tune NewServer. The zero value is ready to use.
type Options struct {
	// Logger receives reloads, refusals and certmagic's own records; nil
	// means slog.Default().
	Logger *slog.Logger
	// RenewCheckInterval is how often ACME certificates are checked for
	// renewal; zero means certmagic's default, 10 minutes. Tests shorten it.
	RenewCheckInterval time.Duration
}

// Server is TLS at the platform listener, built from listen.tls. It
// supplies the listener's *tls.Config (TLS 1.2 or higher, HTTP/2 and
// HTTP/1.1 by ALPN, client certificates when listen.tls.client_ca_file is
// set), keeps the certificate current — ACME management and renewal with
// certmagic, or certificate files re-read when they change — and serves
// the optional plain-HTTP listener on listen.tls.http_address.
//
// In mode off it does nothing: Config is nil and Wrap returns its
// listener unchanged.
//
// Use: NewServer, Wrap the open listener, Start, serve; Close at
// shutdown. Reload, Config and HTTPHandler are safe for concurrent use.
type Server struct {
	mode      string
	conf      *cryptotls.Config
	files     *certFiles   // mode files
	acme      *acmeManager // modes acme and on_demand
	interval  time.Duration
	httpsPort atomic.Int32 // the port redirects point to; 0: none known
	log       *slog.Logger

	stop      context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// NewServer builds the listener TLS for c; address is listen.address. It
// reads the certificate files and listen.tls.client_ca_file, so that a
// bad file stops the start; ACME certificates are obtained only by Start.
func NewServer(c config.ListenTLS, address string, opts Options) (*Server, error) {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{mode: c.Mode, interval: c.ReloadInterval, log: log.With(slog.String("listener", "tls"))}
	if s.interval <= 0 {
		s.interval = config.DefaultTLSReloadInterval
	}
	if c.Mode == "" || c.Mode == config.TLSModeOff {
		s.mode = config.TLSModeOff
		return s, nil
	}
	s.conf = &cryptotls.Config{MinVersion: cryptotls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	if c.MinVersion == "1.3" {
		s.conf.MinVersion = cryptotls.VersionTLS13
	}
	if c.ClientCAFile != "" {
		pool, err := readPool(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("client_ca_file: %w", err)
		}
		s.conf.ClientCAs, s.conf.ClientAuth = pool, cryptotls.VerifyClientCertIfGiven
	}
	switch c.Mode {
	case config.TLSModeFiles:
		f, err := newCertFiles(c.CertFile, c.KeyFile, s.log)
		if err != nil {
			return nil, err
		}
		s.files, s.conf.GetCertificate = f, f.getCertificate
	case config.TLSModeACME, config.TLSModeOnDemand:
		m, err := newACMEManager(c, address, opts, s.log)
		if err != nil {
			return nil, err
		}
		s.acme, s.conf.GetCertificate = m, m.magic.GetCertificate
		s.conf.NextProtos = append(s.conf.NextProtos, acmeTLS1) // TLS-ALPN-01 challenges
	default:
		return nil, fmt.Errorf("unknown listen.tls.mode %q", c.Mode)
	}
	if c.HTTPSPort != 0 {
		s.httpsPort.Store(int32(c.HTTPSPort))
	}
	return s, nil
}

// Mode returns listen.tls.mode: off, acme, on_demand or files.
func (s *Server) Mode() string { return s.mode }

// Config returns the listener's TLS configuration, nil in mode off. Set it
// as the http.Server's TLSConfig too, so that the server speaks HTTP/2.
func (s *Server) Config() *cryptotls.Config { return s.conf }

// Wrap returns ln serving TLS, or ln itself in mode off. Redirects from
// the HTTP listener point to ln's port unless listen.tls.https_port says
// otherwise.
func (s *Server) Wrap(ln net.Listener) net.Listener {
	if s.conf == nil {
		return ln
	}
	if a, ok := ln.Addr().(*net.TCPAddr); ok {
		s.httpsPort.CompareAndSwap(0, int32(a.Port))
	}
	return cryptotls.NewListener(ln, s.conf)
}

// Start begins keeping the certificate current: in mode acme it loads or
// obtains the certificates of listen.tls.domains in the background (the
// listeners must be open, since the CA's challenges arrive on them), in
// mode files it polls the files every reload_interval. It returns at
// once; Close stops it.
func (s *Server) Start(ctx context.Context) error {
	ctx, s.stop = context.WithCancel(ctx)
	switch {
	case s.files != nil:
		s.files.logServing()
		s.wg.Go(func() { s.files.watch(ctx, s.interval) })
	case s.acme != nil:
		return s.acme.start(ctx)
	}
	return nil
}

// Reload reads the certificate files again now (on SIGHUP); in the other
// modes it does nothing. On error the previous certificate stays in
// service; a success is logged, an error is the caller's to log.
func (s *Server) Reload() error {
	if s.files == nil {
		return nil
	}
	return s.files.reload("reload")
}

// Close stops renewals and the file watcher. Connections are not touched.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			s.stop()
		}
		s.wg.Wait()
		if s.acme != nil {
			s.acme.close()
		}
	})
}

// HTTPHandler is the handler for listen.tls.http_address: it answers ACME
// HTTP-01 challenges (modes acme and on_demand) and redirects every other
// request to the same host and path over HTTPS with 308 Permanent
// Redirect, which keeps the method and body.
func (s *Server) HTTPHandler() http.Handler {
	redirect := http.HandlerFunc(s.redirect)
	if s.acme != nil {
		return s.acme.challengeHandler(redirect)
	}
	return redirect
}

func (s *Server) redirect(w http.ResponseWriter, r *http.Request) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if host == "" {
		osb.WriteError(w, osb.Errorf(http.StatusBadRequest, "", "a Host header is required to redirect to HTTPS: expected the gateway's host name, got none"))
		return
	}
	if port := int(s.httpsPort.Load()); port != 0 && port != 443 {
		host = net.JoinHostPort(host, strconv.Itoa(port))
	} else if net.ParseIP(host) != nil && net.ParseIP(host).To4() == nil {
		host = "[" + host + "]"
	}
	http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
}
