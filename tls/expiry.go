package tls

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"slices"
)

// Certificates returns the leaf certificates the listener serves now: the
// certificate files' pair, or the ACME certificates of the configured
// domains (in on_demand mode, those of the allowed names obtained so far
// that are not wildcard patterns). Nil in mode off. Safe for concurrent
// use; the certificates must not be modified. The metrics read it at
// scrape time (osb_gateway_certificate_expiry_seconds).
func (s *Server) Certificates() []*x509.Certificate {
	switch {
	case s.files != nil:
		if leaf := Leaf(s.files.cur.Load()); leaf != nil {
			return []*x509.Certificate{leaf}
		}
	case s.acme != nil:
		return s.acme.certificates()
	}
	return nil
}

// certificates returns the cached leaves of the managed domains, each once.
func (m *acmeManager) certificates() []*x509.Certificate {
	var out []*x509.Certificate
	for _, name := range append(slices.Clone(m.domains), m.allow...) {
		for _, c := range m.cache.AllMatchingCertificates(name) {
			leaf := Leaf(&c.Certificate)
			if leaf != nil && !slices.ContainsFunc(out, leaf.Equal) {
				out = append(out, leaf)
			}
		}
	}
	return out
}

// Leaf returns c's leaf certificate, parsed when c does not carry it; nil
// for a nil or empty c, or one whose leaf does not parse.
func Leaf(c *cryptotls.Certificate) *x509.Certificate {
	if c == nil || len(c.Certificate) == 0 {
		return nil
	}
	if c.Leaf != nil {
		return c.Leaf
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		return nil
	}
	return leaf
}
