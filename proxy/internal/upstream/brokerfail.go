package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"syscall"
)

// What a platform reads of a broker call that got no usable answer names
// the broker and what happened, never where the broker is: in a
// multi-tenant gateway, a transport error (`dial tcp 10.0.3.7:8182:
// connect: connection refused`) would show every platform the network
// behind the gateway. The address and the Go error go to the log (the
// access line's error, the catalog fetch's warning) and to the broker
// call's client span (server.address, server.port, the recorded error)
// only.

// Withheld is a failed broker call the gateway made itself (catalog fetch,
// orphan DELETE, the GET binding after sync_within): said is what a
// platform may read, err the transport's error, for the log and operators.
type Withheld struct {
	Said string
	Err  error
}

// Error is the whole story, for the log and operator-only answers (check,
// the admin API).
func (e *Withheld) Error() string { return e.Said + ": " + e.Err.Error() }

func (e *Withheld) Unwrap() error { return e.Err }

// Failed is err, a broker call's transport error, as a withheld error
// whose platform text starts "the broker …".
func (u *Upstream) Failed(err error) error {
	return &Withheld{Said: "the broker " + u.describe(err), Err: err}
}

// Said is what a platform may read of err: a withheld error's own words
// (even when wrapped: the wrapper's text is dropped with the cause's), or
// err's text, which the gateway wrote itself.
func Said(err error) string {
	var w *Withheld
	if errors.As(err, &w) {
		return w.Said
	}
	return err.Error()
}

// describe says what went wrong with a broker call, for a platform: the
// gateway's credentials (brokerauth.go: nothing of an address in it), then
// describeFailure's transport failures, with the broker's settings that
// fix them.
func (u *Upstream) describe(err error) string {
	var auth *authFailed
	if errors.As(err, &auth) {
		return auth.said
	}
	h := brokerHints
	if len(u.TLS.Certificates) == 0 {
		h.clientCert = " (if it requires a client certificate, set brokers[].tls.cert_file and key_file)"
	}
	return describeFailure(err, h)
}

// failureHints are the settings describeFailure names for a failure of
// the kind: the CAs trusted, the name checked, the URL's scheme, a client
// certificate missing.
type failureHints struct{ ca, name, scheme, clientCert string }

var brokerHints = failureHints{
	ca:     " (brokers[].tls.ca_file names the CA to trust)",
	name:   " (the URL's host, or brokers[].tls.server_name)",
	scheme: " (is the URL's scheme right?)",
}

// describeFailure says what went wrong with a call to a server of the
// broker's (the broker, its OAuth2 token endpoint) that got no answer, for
// a platform: TLS failures by kind, with the setting that fixes them (h),
// then connection failures. It never quotes the Go error, which names the
// server's address (and, for a certificate, the name or IP the gateway
// checked).
func describeFailure(err error, h failureHints) string {
	var (
		unknownCA x509.UnknownAuthorityError
		hostname  x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		verify    *tls.CertificateVerificationError
		op        *net.OpError
		dns       *net.DNSError
	)
	switch {
	case errors.As(err, &unknownCA):
		return "failed the TLS handshake: its certificate is signed by an unknown authority" + h.ca
	case errors.As(err, &hostname):
		return "failed the TLS handshake: its certificate does not cover the name the gateway checks" + h.name
	case errors.As(err, &invalid) && invalid.Reason == x509.Expired:
		return "failed the TLS handshake: its certificate has expired or is not yet valid"
	case errors.As(err, &verify):
		return "failed the TLS handshake: its certificate was not accepted"
	case errors.As(err, &record):
		return "does not speak TLS at its address" + h.scheme
	case errors.As(err, &op) && op.Op == "remote error":
		// op.Err is the alert it sent ("tls: certificate required"):
		// words of the protocol, no address.
		return "refused the TLS handshake" + h.clientCert + ": " + op.Err.Error()
	case errors.As(err, &dns):
		return "could not be reached: its host name could not be resolved"
	case errors.As(err, &op) && op.Op == "dial":
		switch {
		case errors.Is(err, syscall.ECONNREFUSED):
			return "could not be reached: it refused the connection"
		case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
			return "could not be reached: there is no route to it"
		}
		return "could not be reached"
	case errors.Is(err, syscall.ECONNRESET):
		return "reset the connection before it answered"
	}
	return "failed or answered with something that is not HTTP"
}

// CutReason says, for a platform, why a broker answer's body ended early
// ("" when nothing more can be said without the Go error).
func CutReason(err error) string {
	switch {
	case errors.Is(err, ErrOverShared):
		return ": " + ErrOverShared.Error()
	case errors.Is(err, errOverChecked):
		return ": " + errOverChecked.Error()
	case errors.Is(err, syscall.ECONNRESET):
		return " (it reset the connection)"
	}
	return ""
}
