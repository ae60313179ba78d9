package tls

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// Upstream builds the client TLS configuration for one broker: roots from
// c.CAFile (the system roots when empty), a client certificate from
// c.CertFile and c.KeyFile (mTLS) and c.ServerName. The minimum version is
// c.MinVersion, "1.2" (also when empty) or "1.3". c.InsecureSkipVerify
// turns verification off (Warnings reports it). It reads the files once;
// errors name the file and the cause.
func Upstream(c config.UpstreamTLS) (*cryptotls.Config, error) {
	tc := &cryptotls.Config{MinVersion: cryptotls.VersionTLS12, ServerName: c.ServerName,
		InsecureSkipVerify: c.InsecureSkipVerify} // opted into; Warnings reports it
	switch c.MinVersion {
	case "", "1.2":
	case "1.3":
		tc.MinVersion = cryptotls.VersionTLS13
	default:
		return nil, fmt.Errorf("min_version %q: must be 1.2 or 1.3", c.MinVersion)
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading ca_file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_file %s holds no PEM certificate", c.CAFile)
		}
		tc.RootCAs = pool
	}
	if c.CertFile != "" || c.KeyFile != "" {
		cert, err := cryptotls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading client certificate %s and key %s: %w", c.CertFile, c.KeyFile, err)
		}
		tc.Certificates = []cryptotls.Certificate{cert}
	}
	return tc, nil
}
