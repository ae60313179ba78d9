package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// What a broker call that failed answers: the reverse proxy's error
// handler, and how it tells a timeout and a call that may have reached the
// broker from one that did not.

// CutShort is a broker answer whose body ended before it was complete
// (a connection closed mid-body, a chunked body without its last chunk).
type CutShort struct {
	Status int
	Err    error
}

func (e *CutShort) Error() string {
	return fmt.Sprintf("answered %d but its body was cut short: %v", e.Status, e.Err)
}

// said is what a platform may read of e (see describe): the read error
// names the broker's address.
func (e *CutShort) said() string {
	return fmt.Sprintf("answered %d but its body was cut short%s", e.Status, CutReason(e.Err))
}

func (e *CutShort) Unwrap() error { return e.Err }

// errorHandler turns a failed broker call into an OSB error body: 504 for a
// timeout, 502 for anything else. The body names the broker and what
// happened, never its address or the Go error (describe): those go to the
// log through e.Err and to the client span. A platform that went away gets
// nothing; the log and scope record it (499).
func (u *Upstream) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	s := core.ScopeFrom(r.Context())
	var e *osb.Error
	var refused *core.ResponseRefused
	var cut *CutShort
	var own *OwnAnswer
	var auth *authFailed
	switch {
	case errors.As(err, &own): // the gateway answers in the broker's place (emulate.sync_within)
		s.Fail(w, own.E)
		return
	case errors.As(err, &auth): // the broker refused the gateway's credentials, or no token (brokerauth.go)
		// Never a candidate for orphan mitigation: the broker did nothing.
		e = osb.Errorf(auth.statusFor(s.Call.Endpoint), "", "broker %q %s", u.Name, auth.said)
	case errors.As(err, &refused):
		e = refused.AsOSBError()
	case errors.As(err, &cut):
		e = osb.Errorf(http.StatusBadGateway, "", "broker %q %s", u.Name, cut.said())
	case IsTimeout(err, r.Context()):
		e = u.timeoutError()
		if g := settlerOf(s); g != nil {
			g.OnTimeout(r.Context(), s)
		}
	case s.CallParent != nil && s.CallParent.Err() != nil:
		// The platform went away (a reset, not a half-close): whatever
		// error ended the call, it gets nothing, and the scope stage
		// aborts the answer rather than let a default 200 out.
		s.Err, s.Status = fmt.Errorf("platform went away: %w", err), core.StatusClientClosed
		return
	default:
		e = osb.Errorf(http.StatusBadGateway, "", "broker %q %s", u.Name, u.describe(err))
		if g := settlerOf(s); g != nil && mayHaveReached(err) {
			// The request went out and no answer came back (a reset, a
			// connection closed before the answer): as after a timeout,
			// the broker may have done it, or be doing it, so a retry must
			// not overlap it (the campaign's "broker connection reset after
			// the request").
			g.OnTimeout(r.Context(), s)
		}
	}
	e.Err = err
	s.Fail(w, e)
}

// mayHaveReached reports whether a broker call that failed with err may
// have reached the broker: anything but a failure to connect (a refused
// or unroutable dial, a name that does not resolve, a TLS handshake the
// broker or the gateway refused), which sends nothing.
func mayHaveReached(err error) bool {
	var (
		op       *net.OpError
		dns      *net.DNSError
		record   tls.RecordHeaderError
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &op) && (op.Op == "dial" || op.Op == "remote error"),
		errors.As(err, &dns), errors.As(err, &record), errors.As(err, &verify),
		errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return false
	}
	return true
}

func IsTimeout(err error, ctx context.Context) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func (u *Upstream) timeoutError() *osb.Error {
	if rh := u.Cfg.ResponseHeaderTimeout; rh > 0 && rh < u.Timeout {
		return osb.Errorf(http.StatusGatewayTimeout, "", "broker %q did not answer in time (response headers are due within %s, the whole call within %s)", u.Name, rh, u.Timeout)
	}
	return osb.Errorf(http.StatusGatewayTimeout, "", "broker %q did not answer within %s", u.Name, u.Timeout)
}

// OwnAnswer is an error answer the gateway makes itself in place of the
// broker's (emulate.sync_within), written as it is by errorHandler.
type OwnAnswer struct{ E *osb.Error }

func (a *OwnAnswer) Error() string { return a.E.Error() }

// errOverChecked is readOwn's error for an answer over maxCheckedResponse.
var errOverChecked = errors.New("the answer is larger than " + strconv.Itoa(MaxCheckedResponse) + " bytes")

// ReadOwn reads the body of one of the gateway's own broker calls whole
// (up to maxCheckedResponse) and closes it.
func ReadOwn(res *http.Response) ([]byte, error) {
	defer res.Body.Close()
	body, err := io.ReadAll(io.LimitReader(res.Body, MaxCheckedResponse+1))
	if err == nil && len(body) > MaxCheckedResponse {
		err = errOverChecked
	}
	return body, err
}

var HeaderRetryAfter = http.CanonicalHeaderKey("Retry-After")

// ErrOverShared cuts a shared answer over maxSharedAnswer short.
var ErrOverShared = fmt.Errorf("the answer is over %d bytes, the most the gateway shares among polls", MaxCheckedResponse)
