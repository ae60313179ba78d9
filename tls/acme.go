package tls

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/caddyserver/certmagic"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// acmeManager obtains and renews the listener's certificates with
// certmagic: for listen.tls.domains at start (mode acme), or for allowed
// names at their first handshake (mode on_demand).
//
// Challenges are answered by the gateway's own listeners: TLS-ALPN-01 by
// the main listener's GetCertificate, HTTP-01 by the handler on
// listen.tls.http_address. The issuer is told their ports so that
// certmagic finds them taken and does not start listeners of its own.
type acmeManager struct {
	magic   *certmagic.Config
	cache   *certmagic.Cache
	issuer  *certmagic.ACMEIssuer
	domains []string // managed from start (acme)
	allow   []string // names and *. patterns allowed on demand
	log     *slog.Logger
}

// newACMEManager builds the certmagic cache, configuration and ACME issuer
// for c. It starts the cache's maintenance goroutine (renewals), which
// close stops; it does not reach the CA yet.
func newACMEManager(c config.ListenTLS, address string, opts Options, log *slog.Logger) (*acmeManager, error) {
	zl := zapLogger(log)
	m := &acmeManager{log: log}
	var roots *x509.CertPool
	if c.CARoot != "" {
		pool, err := readPool(c.CARoot)
		if err != nil {
			return nil, fmt.Errorf("ca_root: %w", err)
		}
		roots = pool
	}
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, fmt.Errorf("listen.address: %w", err)
	}
	tlsPort, _ := strconv.Atoi(port)
	httpPort := 0
	if c.HTTPAddress != "" {
		if _, p, err := net.SplitHostPort(c.HTTPAddress); err == nil {
			httpPort, _ = strconv.Atoi(p)
		}
	}

	m.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return m.magic, nil },
		RenewCheckInterval: opts.RenewCheckInterval,
		Logger:             zl,
	})
	tmpl := certmagic.Config{Logger: zl}
	if c.Storage != "" {
		tmpl.Storage = &certmagic.FileStorage{Path: c.Storage}
	}
	switch c.Mode {
	case config.TLSModeOnDemand:
		m.allow = append(slices.Clone(c.OnDemand.Allow), c.Domains...)
		tmpl.OnDemand = &certmagic.OnDemandConfig{DecisionFunc: m.decide}
	default:
		m.domains = c.Domains
		if len(c.Domains) > 0 {
			tmpl.DefaultServerName = c.Domains[0] // for clients that send no SNI
		}
	}
	m.magic = certmagic.New(m.cache, tmpl)
	m.issuer = certmagic.NewACMEIssuer(m.magic, certmagic.ACMEIssuer{
		CA:                      c.CA,
		Email:                   c.Email,
		Agreed:                  true, // configuring a CA is agreeing to its terms
		TrustedRoots:            roots,
		DisableHTTPChallenge:    !slices.Contains(c.Challenges, config.ChallengeHTTP01),
		DisableTLSALPNChallenge: !slices.Contains(c.Challenges, config.ChallengeTLSALPN01),
		ListenHost:              host,
		AltTLSALPNPort:          tlsPort,
		AltHTTPPort:             httpPort,
		Logger:                  zl,
	})
	m.magic.Issuers = []certmagic.Issuer{m.issuer}
	return m, nil
}

// start begins managing the configured domains in the background: each
// certificate is loaded from storage or obtained, then renewed by the
// cache's maintenance. Failures are logged and retried with backoff;
// cancelling ctx stops the retries.
func (m *acmeManager) start(ctx context.Context) error {
	if len(m.domains) == 0 {
		return nil
	}
	m.log.Info("managing certificates", slog.Any("domains", m.domains), slog.String("ca", m.issuer.CA))
	return m.magic.ManageAsync(ctx, m.domains)
}

// decide is the on-demand DecisionFunc: a certificate may be obtained for
// name only when it is on the allow list.
func (m *acmeManager) decide(_ context.Context, name string) error {
	for _, pattern := range m.allow {
		if matchHost(pattern, name) {
			return nil
		}
	}
	m.log.Debug("on-demand certificate refused: the name is not on listen.tls.on_demand.allow", slog.String("name", name))
	return fmt.Errorf("%q is not on listen.tls.on_demand.allow", name)
}

// challengeHandler answers ACME HTTP-01 challenges and passes every other
// request to next.
func (m *acmeManager) challengeHandler(next http.Handler) http.Handler {
	return m.issuer.HTTPChallengeHandler(next)
}

// close stops certificate maintenance.
func (m *acmeManager) close() { m.cache.Stop() }

// matchHost reports whether host name matches pattern: equal ignoring
// case, or, for a pattern "*.example.com", a name of exactly one more
// label ("a.example.com", not "a.b.example.com" or "example.com").
func matchHost(pattern, name string) bool {
	pattern, name = strings.ToLower(strings.TrimSuffix(pattern, ".")), strings.ToLower(strings.TrimSuffix(name, "."))
	suffix, wild := strings.CutPrefix(pattern, "*.")
	if !wild {
		return pattern == name
	}
	label, rest, ok := strings.Cut(name, ".")
	return ok && label != "" && label != "*" && rest == suffix
}

// readPool reads a PEM file of certificates into a pool.
func readPool(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", file)
	}
	return pool, nil
}
