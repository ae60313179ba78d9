package tls

import (
	cryptotls "crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// Errors of MatchClientCert; a certificate that matches no pattern is a
// *ClientCertMismatchError instead.
var (
	// ErrNoClientCert: the connection carries no client certificate (plain
	// HTTP, or the client sent none).
	ErrNoClientCert = errors.New("no client certificate was presented")
	// ErrClientCertUnverified: a certificate was sent but not verified,
	// because listen.tls.client_ca_file is not set.
	ErrClientCertUnverified = errors.New("the client certificate was not verified: listen.tls.client_ca_file is not set")
)

// ClientCertMismatchError is a verified client certificate that fits none
// of a tenant's subjects or SANs.
type ClientCertMismatchError struct {
	Subject string   // the certificate's subject, RFC 4514
	SANs    []string // its subject alternative names
}

// Error implements error.
func (e *ClientCertMismatchError) Error() string {
	return fmt.Sprintf("the client certificate %q (SANs %s) matches none of the tenant's subjects and sans",
		e.Subject, strings.Join(e.SANs, ", "))
}

// ClientCertRule is what one tenant asks of client certificates, built
// from tenants[].client_cert by NewClientCertRule. The zero value is mode
// off. It is immutable and safe for concurrent use.
type ClientCertRule struct {
	mode     string
	subjects [][]config.SubjectAttribute
	sans     []string
}

// NewClientCertRule builds the rule of a validated tenants[].client_cert.
// It fails only on a subject pattern that config.ParseSubject refuses.
func NewClientCertRule(c config.ClientCert) (ClientCertRule, error) {
	r := ClientCertRule{mode: c.Mode, sans: c.SANs}
	for _, s := range c.Subjects {
		attrs, err := config.ParseSubject(s)
		if err != nil {
			return ClientCertRule{}, err
		}
		r.subjects = append(r.subjects, attrs)
	}
	return r, nil
}

// PasswordNeeded applies the rule's mode to a request's connection state
// (http.Request.TLS, nil over plain HTTP), for the auth stage:
//
//	off         the password decides: (true, nil)
//	optional    no certificate: (true, nil); a matching one: (true, nil);
//	            any other: (false, err)
//	required    a matching certificate: (true, nil); else (false, err)
//	sufficient  a matching certificate: (false, nil), authenticated;
//	            no certificate: (true, nil); any other: (false, err)
//
// A non-nil error means the request is refused, whatever the password;
// it is one of MatchClientCert's.
func (r ClientCertRule) PasswordNeeded(state *cryptotls.ConnectionState) (bool, error) {
	if r.mode == "" || r.mode == config.ClientCertOff {
		return true, nil
	}
	err := MatchClientCert(state, r)
	switch {
	case err == nil:
		return r.mode != config.ClientCertSufficient, nil
	case errors.Is(err, ErrNoClientCert) && r.mode != config.ClientCertRequired:
		return true, nil
	}
	return false, err
}

// MatchClientCert reports whether the connection carries a verified
// client certificate that fits rule: one of its subjects (when it has
// any) and one of its SANs (when it has any). It returns nil for a match,
// ErrNoClientCert or ErrClientCertUnverified, or a
// *ClientCertMismatchError. It looks at nothing but its arguments.
func MatchClientCert(state *cryptotls.ConnectionState, rule ClientCertRule) error {
	if state == nil || len(state.PeerCertificates) == 0 {
		return ErrNoClientCert
	}
	if len(state.VerifiedChains) == 0 {
		return ErrClientCertUnverified
	}
	leaf := state.PeerCertificates[0]
	subjectOK := len(rule.subjects) == 0 || slices.ContainsFunc(rule.subjects, func(want []config.SubjectAttribute) bool {
		return subjectHas(leaf.Subject, want)
	})
	sanOK := len(rule.sans) == 0 || slices.ContainsFunc(rule.sans, func(want string) bool {
		return hasSAN(leaf, want)
	})
	if subjectOK && sanOK {
		return nil
	}
	return &ClientCertMismatchError{Subject: leaf.Subject.String(), SANs: sanList(leaf)}
}

// subjectHas reports whether name has every attribute of want.
func subjectHas(name pkix.Name, want []config.SubjectAttribute) bool {
	for _, a := range want {
		var values []string
		switch a.Type {
		case "CN":
			values = []string{name.CommonName}
		case "O":
			values = name.Organization
		case "OU":
			values = name.OrganizationalUnit
		case "C":
			values = name.Country
		case "L":
			values = name.Locality
		case "ST":
			values = name.Province
		case "STREET":
			values = name.StreetAddress
		case "POSTALCODE":
			values = name.PostalCode
		case "SERIALNUMBER":
			values = []string{name.SerialNumber}
		}
		if !slices.Contains(values, a.Value) {
			return false
		}
	}
	return true
}

// hasSAN reports whether cert has a subject alternative name equal to
// want: a DNS name (ignoring case; want may be a "*." pattern), an email
// address (the domain ignoring case), a URI, or an IP address.
func hasSAN(cert *x509.Certificate, want string) bool {
	if slices.ContainsFunc(cert.DNSNames, func(n string) bool {
		return strings.EqualFold(n, want) || matchHost(want, n)
	}) {
		return true
	}
	if slices.ContainsFunc(cert.EmailAddresses, func(e string) bool { return equalEmail(e, want) }) {
		return true
	}
	if slices.ContainsFunc(cert.URIs, func(u *url.URL) bool { return u.String() == want }) {
		return true
	}
	ip := net.ParseIP(want)
	return ip != nil && slices.ContainsFunc(cert.IPAddresses, ip.Equal)
}

// equalEmail compares two email addresses, the domain ignoring case.
func equalEmail(a, b string) bool {
	la, da, okA := strings.Cut(a, "@")
	lb, db, okB := strings.Cut(b, "@")
	return okA && okB && la == lb && strings.EqualFold(da, db)
}

// sanList lists cert's subject alternative names, for messages.
func sanList(cert *x509.Certificate) []string {
	var out []string
	for _, n := range cert.DNSNames {
		out = append(out, "DNS:"+n)
	}
	for _, e := range cert.EmailAddresses {
		out = append(out, "email:"+e)
	}
	for _, u := range cert.URIs {
		out = append(out, "URI:"+u.String())
	}
	for _, ip := range cert.IPAddresses {
		out = append(out, "IP:"+ip.String())
	}
	return out
}
