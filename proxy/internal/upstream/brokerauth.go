package upstream

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/rules"
)

// brokerAuth is a broker's outbound authentication beyond one basic
// credential, a RoundTripper right around the broker's own transport, so
// that every call to the broker — proxied, catalog fetch, orphan DELETE,
// poll — carries it: two basic credentials during a rotation
// (brokers[].next_password), a bearer token read from a file, or an OAuth2
// client-credentials token. A broker with one basic credential has none:
// its Authorization value is set by the reverse proxy's Rewrite, as
// before, and its calls pay nothing for this.
//
// On a 401 the call is sent once more with the other credential (the next
// password, the token file read again, a fresh OAuth2 token). That is safe
// for every call, mutating ones included, because a 401 is the answer to
// the request: a broker authenticates a request before it acts on it, so
// a 401 says the broker refused the call and did nothing (OSB brokers are
// protected by basic or bearer auth in front of the handlers; none
// provisions and then answers 401). A call whose body cannot be sent
// again is not retried. The platform never sees the broker's 401: after a
// second one it gets a 502 that says the broker refused both credentials.
type brokerAuth struct {
	rt      http.RoundTripper
	name    string
	kind    string
	log     *slog.Logger
	metrics atomic.Pointer[metrics.Metrics]

	// basic: the Authorization values of the current and the next
	// credential; using is the index of the one that last worked, shared
	// by all of the broker's calls.
	basic [2][]string
	using atomic.Int32

	// bearer: the token file and the Authorization value of what it held.
	tokenFile string
	bearer    atomic.Pointer[[]string]

	// oauth2: the token source and the Authorization value of its last
	// token.
	oauth *oauthTokens
}

// The credentials of a rotation, as osb_gateway_broker_credential's
// "which" label names them.
const (
	credentialCurrent = 0
	credentialNext    = 1
)

// newBrokerAuth returns the authentication of broker b around rt, or nil
// when b has one basic credential (or none). tc is the broker's TLS
// configuration, whose roots the OAuth2 token endpoint is checked with.
func newBrokerAuth(b *config.Broker, rt http.RoundTripper, tc *tls.Config, log *slog.Logger) *brokerAuth {
	a := &brokerAuth{rt: rt, name: b.Name, kind: b.Auth.Kind(), log: log}
	switch a.kind {
	case config.BrokerAuthBearer:
		a.tokenFile = b.Auth.TokenFile
		h := bearerHeader(b.Auth.Token.Reveal())
		a.bearer.Store(&h)
	case config.BrokerAuthOAuth2:
		a.oauth = newOAuthTokens(b, tc, log, &a.metrics)
	default:
		if b.NextPassword == "" {
			return nil
		}
		user := cmpOr(b.NextUsername, b.Username)
		a.basic[credentialCurrent] = basicHeader(b.Username, b.Password.Reveal())
		a.basic[credentialNext] = basicHeader(user, b.NextPassword.Reveal())
	}
	return a
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func basicHeader(user, password string) []string {
	return []string{"Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))}
}

func bearerHeader(token string) []string { return []string{"Bearer " + token} }

// Start sets the broker's credential gauge and, when the broker had an
// upstream before a reload (prev), keeps the credential that worked if
// the new configuration still holds it.
func (a *brokerAuth) Start(m *metrics.Metrics, prev *Upstream) {
	if a.kind == config.BrokerAuthBasic && prev != nil && prev.BrokerAuth != nil && prev.BrokerAuth.kind == config.BrokerAuthBasic {
		old := prev.BrokerAuth.basic[prev.BrokerAuth.using.Load()]
		if len(old) == 1 && old[0] == a.basic[credentialNext][0] {
			a.using.Store(credentialNext)
		}
	}
	a.metrics.Store(m)
	a.showCredential()
}

// Rotating reports whether a holds two basic credentials (nil: false).
func (a *brokerAuth) Rotating() bool { return a != nil && a.kind == config.BrokerAuthBasic }

// showCredential sets osb_gateway_broker_credential (basic rotation only).
func (a *brokerAuth) showCredential() {
	if a.kind != config.BrokerAuthBasic {
		return
	}
	a.metrics.Load().BrokerCredential(a.name, int(a.using.Load()))
}

// RoundTrip implements http.RoundTripper. It sets the request's
// Authorization in place, as the reverse proxy's Rewrite does: the
// request is the proxy's (or the gateway's own) outgoing one.
func (a *brokerAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	hdr, err := a.credential(req.Context())
	if err != nil {
		return nil, err
	}
	req.Header["Authorization"] = hdr
	res, err := a.rt.RoundTrip(req)
	if err != nil || res.StatusCode != http.StatusUnauthorized {
		return res, err
	}
	// The broker refused the credential before acting on the call (see
	// brokerAuth): send it once more with the other one.
	body, ok := replayBody(req)
	if !ok {
		discard(res)
		return nil, a.refused("its body could not be sent a second time")
	}
	other, which, err := a.other(req.Context(), hdr)
	if err != nil {
		discard(res)
		return nil, err
	}
	if other == nil {
		discard(res)
		return nil, a.refused("")
	}
	discard(res)
	r2 := *req
	r2.Header = req.Header.Clone() // the first request's may still be read by its transport
	r2.Header["Authorization"] = other
	r2.Body = body
	res, err = a.rt.RoundTrip(&r2)
	if err != nil {
		return nil, err
	}
	if res.StatusCode == http.StatusUnauthorized {
		discard(res)
		return nil, a.refused("both")
	}
	a.worked(which)
	return res, nil
}

// credential is the Authorization value to send first; ctx is the
// call's (an OAuth2 token is waited for within its deadline).
func (a *brokerAuth) credential(ctx context.Context) ([]string, error) {
	switch a.kind {
	case config.BrokerAuthBearer:
		return *a.bearer.Load(), nil
	case config.BrokerAuthOAuth2:
		return a.oauth.header(ctx)
	}
	return a.basic[a.using.Load()], nil
}

// other is the Authorization value to send after refused got a 401, and
// the index of the basic credential it is (-1 otherwise); nil when there
// is no other: the token file holds the token refused. ctx is the call's.
func (a *brokerAuth) other(ctx context.Context, refused []string) ([]string, int, error) {
	switch a.kind {
	case config.BrokerAuthBearer:
		data, err := os.ReadFile(a.tokenFile)
		if err != nil {
			a.log.Warn("broker refused its bearer token and the token file cannot be read again", "broker", a.name, "error", fileErrorText(err))
			return nil, -1, nil
		}
		h := bearerHeader(strings.TrimRight(string(data), "\r\n"))
		if len(h[0]) == len("Bearer ") || h[0] == refused[0] {
			return nil, -1, nil
		}
		a.bearer.Store(&h)
		a.log.Info("broker refused its bearer token; the token file held a new one", "broker", a.name)
		return h, -1, nil
	case config.BrokerAuthOAuth2:
		h, err := a.oauth.refresh(ctx, refused)
		if err != nil {
			return nil, -1, err
		}
		a.log.Info("broker refused its OAuth2 token; a new one was fetched", "broker", a.name)
		return h, -1, nil
	}
	which := credentialNext
	if refused[0] == a.basic[credentialNext][0] {
		which = credentialCurrent
	}
	return a.basic[which], which, nil
}

// worked keeps the basic credential which after it was accepted.
func (a *brokerAuth) worked(which int) {
	if which < 0 {
		return
	}
	from := 1 - which
	if !a.using.CompareAndSwap(int32(from), int32(which)) {
		return // another call switched first
	}
	a.log.Info("broker credential switched: the broker refused one with 401 and accepted the other",
		"broker", a.name, "from", metrics.CredentialNames[from], "to", metrics.CredentialNames[which])
	a.showCredential()
}

// refused is the error of a call the broker refused with 401 after the
// gateway tried what it could; what says what ("both": both credentials
// were refused; "" the only one; else why no second try was made).
func (a *brokerAuth) refused(what string) error {
	var desc string
	switch {
	case what == "both" && a.kind == config.BrokerAuthBasic:
		desc = "refused both credentials the gateway holds for it (brokers[].password and next_password): 401 to each"
	case what == "both":
		desc = fmt.Sprintf("refused the gateway's %s token with 401, and a fresh one too", a.kind)
	case what == "":
		desc = fmt.Sprintf("refused the gateway's %s token with 401 (brokers[].auth.token_file holds no other)", a.kind)
	default:
		desc = "refused the gateway's credential with 401, and the call was not retried: " + what
	}
	a.log.Warn("broker refused the gateway's credentials", "broker", a.name, "auth", a.kind, "tried", what)
	return &authFailed{status: http.StatusBadGateway, said: desc}
}

// authFailed is a broker call that failed for the gateway's credentials:
// the broker refused them, or no token could be had. Nothing the broker
// did came of it. said is what a platform reads after "broker %q "
// (upstream.errorHandler, describe), never an address; status is its
// answer's status.
type authFailed struct {
	status int
	said   string
	// noToken: no OAuth2 token could be had, so the call was not sent (or,
	// after a 401, not sent again). A mutating call gets 429 in place of
	// status, as the protections answer a call they keep from the broker:
	// a 5xx to a provision or bind would set off the platform's orphan
	// mitigation, and the broker made nothing.
	noToken bool
	// detail is the failure as operators read it, in the log and the
	// broker call's client span: it may name the token endpoint. "": said.
	detail string
}

// NoToken implements core.NoToken: no OAuth2 token could be had.
func (e *authFailed) NoToken() bool { return e.noToken }

// Error is detail, else said: what the log and the client span record.
func (e *authFailed) Error() string {
	if e.detail != "" {
		return e.detail
	}
	return e.said
}

// statusFor is the status of the answer to a call of endpoint ep.
func (e *authFailed) statusFor(ep rules.Endpoint) int {
	if e.noToken && ep.Mutating() {
		return http.StatusTooManyRequests
	}
	return e.status
}

// replayBody returns a reader over req's body for a second send: its
// GetBody's, or the platform call's body the body stage buffered
// (Scope.Body, which the outgoing request carries); false when the body
// cannot be had again.
func replayBody(req *http.Request) (io.ReadCloser, bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Body, true
	}
	if req.GetBody != nil {
		b, err := req.GetBody()
		return b, err == nil
	}
	if s := core.ScopeFrom(req.Context()); s != nil && !s.Own && int64(len(s.Body)) == req.ContentLength {
		return io.NopCloser(bytes.NewReader(s.Body)), true
	}
	return nil, false
}

// discard reads a little of an answer not passed on, so that its
// connection may be reused, and closes it.
func discard(res *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 4<<10))
	res.Body.Close()
}

// fileErrorText is a file error's cause without the file name.
func fileErrorText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
