package upstream

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// oauthTokens are a broker's OAuth2 client-credentials tokens. The last
// token fetched is sent while it is valid (until oauth2's expiry delta,
// 10s, before it expires); a 401 from the broker drops it.
//
// A call that finds no valid token waits for a fetch, which the calls
// waiting together share: the first starts it, the others join it. The
// fetch runs on a context of its own, bounded by brokers[].timeout, so that
// no caller's departure cancels it for the others. Each caller waits
// within its own context, the broker call's (whose deadline covers the
// token and the broker's answer together), and leaves when that ends: a
// platform's answer comes within brokers[].timeout however long the token
// endpoint takes, and a hanging token endpoint gets one request, not one
// per call.
type oauthTokens struct {
	name     string
	cfg      clientcredentials.Config
	client   *http.Client  // the token endpoint's (in the fetch's context)
	timeout  time.Duration // brokers[].timeout: no fetch runs longer
	endpoint string        // the token URL without its query: for the log and spans, never for a platform
	log      *slog.Logger
	metrics  *atomic.Pointer[metrics.Metrics] // the brokerAuth's

	last   atomic.Pointer[oauthHeader] // the last token fetched; nil: none, or the broker refused it
	mu     sync.Mutex                  // guards flight, and last's replacement
	flight *tokenFetch                 // the fetch in progress; nil: none
}

type oauthHeader struct {
	tok *oauth2.Token
	hdr []string
}

// tokenFetch is one fetch from the token endpoint and the calls waiting
// for it; got and err are set before done is closed.
type tokenFetch struct {
	done chan struct{}
	got  *oauthHeader
	err  *tokenError
}

// tokenError is why a fetch got no token.
type tokenError struct {
	status  int    // the answer to a read: 504 when it did not answer in time, else 502
	outcome string // osb_gateway_broker_token_fetches_total's label
	why     string // for a platform: what the endpoint did, never where it is
	detail  string // for operators: the endpoint's URL and the Go error
}

// The outcomes of a token fetch (osb_gateway_broker_token_fetches_total).
const (
	tokenGot         = "ok"
	tokenNoAnswer    = "timeout"     // no answer within brokers[].timeout
	tokenUnreachable = "unreachable" // no connection, TLS failure, connection reset
	tokenRefused     = "refused"     // 400, 401 or 403 (or an OAuth2 error code): the gateway's client credentials
	tokenFailed      = "failed"      // another status that is not 2xx
	tokenNotAToken   = "not_token"   // a 2xx that holds no token (not JSON or a form, no access_token)
)

func newOAuthTokens(b *config.Broker, tc *tls.Config, log *slog.Logger, m *atomic.Pointer[metrics.Metrics]) *oauthTokens {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tc != nil && tc.RootCAs != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: tc.RootCAs, MinVersion: tls.VersionTLS12}
	}
	o := &oauthTokens{
		name: b.Name,
		cfg: clientcredentials.Config{ClientID: b.Auth.ClientID, ClientSecret: b.Auth.ClientSecret.Reveal(),
			TokenURL: b.Auth.TokenURL, Scopes: b.Auth.Scopes},
		client:   &http.Client{Transport: tr}, // the fetch's context bounds it
		timeout:  cmp.Or(b.Timeout, config.DefaultBrokerTimeout),
		endpoint: b.Auth.TokenURL,
		log:      log,
		metrics:  m,
	}
	if u, err := url.Parse(b.Auth.TokenURL); err == nil {
		u.RawQuery, u.Fragment = "", ""
		o.endpoint = u.String()
	}
	return o
}

// header is the Authorization value of a valid token, waited for within
// ctx when none is cached.
func (o *oauthTokens) header(ctx context.Context) ([]string, error) {
	if l := o.last.Load(); l != nil && l.tok.Valid() {
		return l.hdr, nil
	}
	return o.wait(ctx, nil)
}

// refresh returns a token other than refused, which the broker answered
// 401 to: the cached one if another call fetched it meanwhile, else a new
// one from the token endpoint.
func (o *oauthTokens) refresh(ctx context.Context, refused []string) ([]string, error) {
	return o.wait(ctx, refused)
}

// wait returns a valid token other than refused (nil: any), joining the
// fetch in progress or starting one, within ctx.
func (o *oauthTokens) wait(ctx context.Context, refused []string) ([]string, error) {
	o.mu.Lock()
	l := o.last.Load()
	if l != nil && l.tok.Valid() && (refused == nil || l.hdr[0] != refused[0]) {
		o.mu.Unlock()
		return l.hdr, nil
	}
	f := o.flight
	if f == nil {
		if refused != nil && l != nil && l.hdr[0] == refused[0] {
			o.last.Store(nil) // the calls meanwhile wait for the new one rather than send it
		}
		f = &tokenFetch{done: make(chan struct{})}
		o.flight = f
		go o.fetch(f)
	}
	o.mu.Unlock()
	select {
	case <-f.done:
	case <-ctx.Done():
		select {
		case <-f.done: // both: the token is worth more
		default:
			return nil, o.gaveUp(ctx, refused != nil)
		}
	}
	if f.err != nil {
		return nil, o.failure(f.err, refused != nil)
	}
	return f.got.hdr, nil
}

// fetch gets a token for f, on a context of its own bounded by the
// broker's timeout, logs a failure once (not once per waiting call), and
// counts the fetch once it is no longer in progress.
func (o *oauthTokens) fetch(f *tokenFetch) {
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), oauth2.HTTPClient, o.client), o.timeout)
	start := time.Now()
	tok, err := o.cfg.Token(ctx)
	cancel()
	outcome := tokenGot
	if err != nil {
		f.err = o.failed(err)
		outcome = f.err.outcome
		o.log.Warn("no OAuth2 token for the broker: its calls fail until one can be had",
			"broker", o.name, "token_endpoint", o.endpoint, "outcome", outcome,
			"took", time.Since(start).Round(time.Millisecond), "error", f.err.detail)
	} else {
		f.got = &oauthHeader{tok: tok, hdr: bearerHeader(tok.AccessToken)}
	}
	o.mu.Lock()
	if f.got != nil {
		o.last.Store(f.got)
	}
	o.flight = nil
	o.mu.Unlock()
	o.metrics.Load().TokenFetched(o.name, outcome) // before the waiters go on: counted when they answer
	close(f.done)
}

// failure is the error of a call for which no token could be had; again:
// the broker refused the last one (a call sent once already).
func (o *oauthTokens) failure(e *tokenError, again bool) error {
	said := "was not called: " + e.why
	if again {
		said = "refused the gateway's OAuth2 token with 401, and no new one could be had: " + e.why
	}
	return &authFailed{status: e.status, said: said, noToken: true, detail: e.detail}
}

// gaveUp is the error of a call whose context ended while it waited for a
// token: a 504 when its deadline passed (the fetch goes on for the other
// calls), else the context's cause (the platform went away).
func (o *oauthTokens) gaveUp(ctx context.Context, again bool) error {
	if !IsTimeout(ctx.Err(), ctx) {
		return context.Cause(ctx)
	}
	return o.failure(&tokenError{status: http.StatusGatewayTimeout,
		why:    fmt.Sprintf("its OAuth2 token endpoint did not answer within %s", o.timeout),
		detail: fmt.Sprintf("OAuth2 token endpoint %s: no token when the call's timeout passed", o.endpoint)}, again)
}

// failed says why a fetch got no token: for a platform what the token
// endpoint did, never its URL or host (see brokerfail.go), and never its
// answer's body, which may repeat the client secret; for operators the
// URL (without its query) and the Go error.
func (o *oauthTokens) failed(err error) *tokenError {
	e := &tokenError{status: http.StatusBadGateway}
	var re *oauth2.RetrieveError
	var ue *url.Error
	cause := err.Error()
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		e.status, e.outcome = http.StatusGatewayTimeout, tokenNoAnswer
		e.why = fmt.Sprintf("its OAuth2 token endpoint did not answer within %s", o.timeout)
		cause = "no answer within " + o.timeout.String()
	case errors.As(err, &re) && re.Response != nil:
		code := re.Response.StatusCode
		answered := strconv.Itoa(code)
		if errorCode(re.ErrorCode) {
			answered += " " + re.ErrorCode
		}
		cause = "answered " + answered
		if code == http.StatusBadRequest || code == http.StatusUnauthorized || code == http.StatusForbidden || code < 300 {
			e.outcome = tokenRefused
			e.why = "its OAuth2 token endpoint refused the gateway's client credentials: it answered " + answered +
				" (brokers[].auth.client_id, client_secret_file, scopes)"
		} else {
			e.outcome = tokenFailed
			e.why = "its OAuth2 token endpoint failed: it answered " + answered
		}
	case errors.As(err, &ue):
		e.outcome = tokenUnreachable
		e.why = "its OAuth2 token endpoint " + describeFailure(ue.Err, tokenHints)
		cause = ue.Err.Error() // without the URL's query
	default:
		// oauth2's own errors, which it gives no type: a body that is no
		// token (the texts are pinned by TestBrokerAuthTokenEndpointGarbage).
		e.outcome = tokenNotAToken
		what, ok := "", false
		for _, p := range [...]string{"oauth2: cannot parse json: ", "oauth2: cannot parse response: "} {
			if what, ok = strings.CutPrefix(cause, p); ok {
				break
			}
		}
		switch {
		case ok:
		case cause == "oauth2: server response missing access_token":
			what = "it holds no access_token"
		case strings.HasPrefix(cause, "oauth2: cannot fetch token: "):
			e.outcome, what = tokenUnreachable, ""
			e.why = "its OAuth2 token endpoint broke off its answer"
		default:
			what = "oauth2 could not read it"
		}
		if what != "" {
			e.why = "its OAuth2 token endpoint answered something that is not a token: " + what
		}
	}
	e.detail = fmt.Sprintf("OAuth2 token endpoint %s: %s", o.endpoint, cause)
	return e
}

// tokenHints name the settings that fix a token endpoint's TLS failures.
var tokenHints = failureHints{
	ca:     " (the gateway checks it with brokers[].tls.ca_file when set, else the system's roots)",
	name:   " (token_url's host)",
	scheme: " (is token_url's scheme right?)",
}

// errorCode reports whether s, a token endpoint's "error", is an OAuth2
// error code as RFC 6749 spells them (invalid_client): words of the
// protocol, fit to pass on.
func errorCode(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for _, c := range []byte(s) {
		if (c < 'a' || c > 'z') && c != '_' {
			return false
		}
	}
	return true
}
