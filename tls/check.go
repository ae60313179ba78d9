package tls

import (
	"crypto"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// ExpiryWarning is how close to its end a certificate's validity gets a
// warning from CheckFiles.
const ExpiryWarning = 30 * 24 * time.Hour

// Severity grades a Finding.
type Severity int

const (
	// SeverityError: the file cannot work as configured.
	SeverityError Severity = iota
	// SeverityWarning: the file works now but needs attention soon.
	SeverityWarning
)

// Finding is one problem with a certificate or key file named in the
// configuration.
type Finding struct {
	// Path is the YAML path of the setting that names the file, such as
	// "listen.tls.cert_file" or "brokers[0].tls.ca_file".
	Path     string
	Severity Severity
	// Message says what is wrong, for a person; it names no secret.
	Message string
}

// String formats f as "path: message", with "warning: " before a warning's
// message.
func (f Finding) String() string {
	if f.Severity == SeverityWarning {
		return f.Path + ": warning: " + f.Message
	}
	return f.Path + ": " + f.Message
}

// CheckFiles reads every certificate and key file cfg names — the
// listener's cert_file and key_file (mode files), client_ca_file and
// ca_root, and each broker's ca_file, cert_file and key_file — and reports
// what would fail: unreadable or non-PEM files, a key that does not belong
// to its certificate, certificates expired or not yet valid at now (and,
// as warnings, those ending within ExpiryWarning), and names of
// listen.tls.domains the listener's certificate does not cover. It changes
// nothing.
func CheckFiles(cfg *config.Config, now time.Time) []Finding {
	c := checker{now: now}
	t := cfg.Listen.TLS
	if t.Mode == config.TLSModeFiles && t.CertFile != "" && t.KeyFile != "" {
		if leaf := c.pair("listen.tls", t.CertFile, t.KeyFile); leaf != nil {
			c.covers(leaf, t.Domains)
		}
	}
	c.bundle("listen.tls.client_ca_file", t.ClientCAFile)
	c.bundle("listen.tls.ca_root", t.CARoot)
	for i, b := range cfg.Brokers {
		path := fmt.Sprintf("brokers[%d].tls", i)
		c.bundle(path+".ca_file", b.TLS.CAFile)
		if b.TLS.CertFile != "" && b.TLS.KeyFile != "" {
			c.pair(path, b.TLS.CertFile, b.TLS.KeyFile)
		}
	}
	return c.found
}

// checker collects findings.
type checker struct {
	now   time.Time
	found []Finding
}

func (c *checker) add(path string, sev Severity, format string, args ...any) {
	c.found = append(c.found, Finding{Path: path, Severity: sev, Message: fmt.Sprintf(format, args...)})
}

// certs reads the PEM certificates of file, reporting at path why there
// are none.
func (c *checker) certs(path, file string) []*x509.Certificate {
	data, err := os.ReadFile(file)
	if err != nil {
		c.add(path, SeverityError, "cannot read %s: %s", file, causeOf(err))
		return nil
	}
	var certs []*x509.Certificate
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if block.Type != "CERTIFICATE" {
			continue
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			c.add(path, SeverityError, "%s: certificate %d does not parse: %v", file, len(certs)+1, err)
			return nil
		}
		certs = append(certs, cert)
	}
	if len(certs) == 0 {
		c.add(path, SeverityError, "%s holds no PEM certificate", file)
	}
	return certs
}

// bundle checks a file of CA certificates; an empty file name is skipped.
func (c *checker) bundle(path, file string) {
	if file == "" {
		return
	}
	for _, cert := range c.certs(path, file) {
		c.validity(path, file, cert)
	}
}

// pair checks a certificate chain and its key (path is the section
// holding cert_file and key_file) and returns the leaf, or nil when the
// certificate cannot be read.
func (c *checker) pair(path, certFile, keyFile string) *x509.Certificate {
	chain := c.certs(path+".cert_file", certFile)
	if len(chain) == 0 {
		return nil
	}
	for _, cert := range chain {
		c.validity(path+".cert_file", certFile, cert)
	}
	leaf := chain[0]
	key, err := readKey(keyFile)
	switch {
	case err != nil:
		c.add(path+".key_file", SeverityError, "%v", err)
	case !publicKeyEqual(leaf.PublicKey, key.Public()):
		c.add(path+".key_file", SeverityError, "the key in %s does not belong to the certificate in %s (%s)",
			keyFile, certFile, subjectOf(leaf))
	}
	return leaf
}

// validity reports a certificate that is expired, not yet valid, or ends
// within ExpiryWarning.
func (c *checker) validity(path, file string, cert *x509.Certificate) {
	const day = "2006-01-02 15:04 MST"
	switch left := cert.NotAfter.Sub(c.now); {
	case left < 0:
		c.add(path, SeverityError, "%s: certificate %s expired on %s", file, subjectOf(cert), cert.NotAfter.UTC().Format(day))
	case c.now.Before(cert.NotBefore):
		c.add(path, SeverityError, "%s: certificate %s is not valid before %s", file, subjectOf(cert), cert.NotBefore.UTC().Format(day))
	case left < ExpiryWarning:
		c.add(path, SeverityWarning, "%s: certificate %s expires on %s, in %d days", file, subjectOf(cert),
			cert.NotAfter.UTC().Format(day), int(left.Hours()/24))
	}
}

// covers reports each of domains that leaf does not cover.
func (c *checker) covers(leaf *x509.Certificate, domains []string) {
	for i, d := range domains {
		ok := leaf.VerifyHostname(d) == nil
		if strings.HasPrefix(d, "*.") { // a pattern needs the same wildcard SAN
			ok = false
			for _, n := range leaf.DNSNames {
				ok = ok || strings.EqualFold(n, d)
			}
		}
		if !ok {
			c.add(fmt.Sprintf("listen.tls.domains[%d]", i), SeverityError, "%q is not covered by the certificate in cert_file (it covers %s)",
				d, strings.Join(sanList(leaf), ", "))
		}
	}
}

// readKey reads the first private key of a PEM file: PKCS #8, PKCS #1 or
// SEC 1 (EC).
func readKey(file string) (crypto.Signer, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read %s: %s", file, causeOf(err))
	}
	for block, rest := pem.Decode(data); block != nil; block, rest = pem.Decode(rest) {
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		var key any
		var err error
		switch block.Type {
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(block.Bytes)
		default:
			key, err = x509.ParsePKCS8PrivateKey(block.Bytes)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: the private key does not parse: %v", file, err)
		}
		if s, ok := key.(crypto.Signer); ok {
			return s, nil
		}
		return nil, fmt.Errorf("%s: unsupported private key type %T", file, key)
	}
	return nil, fmt.Errorf("%s holds no PEM private key", file)
}

// publicKeyEqual reports whether two public keys are the same key.
func publicKeyEqual(a, b crypto.PublicKey) bool {
	k, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && k.Equal(b)
}

// subjectOf names a certificate in messages: its subject, else its SANs.
func subjectOf(cert *x509.Certificate) string {
	if s := cert.Subject.String(); s != "" {
		return fmt.Sprintf("%q", s)
	}
	return "(" + strings.Join(sanList(cert), ", ") + ")"
}

// causeOf is the part of a file error worth showing: the cause without
// the file name.
func causeOf(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// Warnings returns what start-up should log as warnings and readiness
// should show about cfg's TLS, one "path: message" each: a plain-HTTP
// listener on an address other than loopback, and brokers whose
// certificates are not verified. It reads no files.
func Warnings(cfg *config.Config) []string {
	var out []string
	if m := cfg.Listen.TLS.Mode; (m == "" || m == config.TLSModeOff) && !isLoopback(cfg.Listen.Address) {
		out = append(out, fmt.Sprintf("listen.tls.mode: off: the platform listener %s speaks plain HTTP beyond loopback, "+
			"so platform credentials cross the network readable; set listen.tls.mode, or terminate TLS in front of the gateway "+
			"and keep the listener on a private network", cfg.Listen.Address))
	}
	for i, b := range cfg.Brokers {
		if b.TLS.InsecureSkipVerify {
			out = append(out, fmt.Sprintf("brokers[%d].tls.insecure_skip_verify: the certificate of broker %q is not verified; "+
				"anyone on the path can pose as the broker and read the credentials sent to it", i, b.Name))
		}
	}
	return out
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
