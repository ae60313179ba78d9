package upstream

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/proxytest"
	"github.com/osb-gateway/osb-gateway/rules"
)

// authBroker is a broker that accepts one Authorization value and records
// what each request carried.
type authBroker struct {
	mu     sync.Mutex
	accept string
	seen   []string // Authorization, body
}

func (b *authBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	b.mu.Lock()
	b.seen = append(b.seen, r.Header.Get("Authorization")+" "+string(body))
	ok := r.Header.Get("Authorization") == b.accept
	b.mu.Unlock()
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"description":"no"}`)
		return
	}
	_, _ = io.WriteString(w, "{}")
}

func (b *authBroker) take() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.seen
	b.seen = nil
	return s
}

func TestBrokerAuthNoneForOneBasicCredential(t *testing.T) {
	for _, b := range []config.Broker{{Username: "u", Password: "p"}, {}, {Username: "u", Password: "p", Auth: &config.BrokerAuth{Type: "basic"}}} {
		if a := newBrokerAuth(&b, http.DefaultTransport, nil, slog.New(slog.DiscardHandler)); a != nil {
			t.Errorf("%+v: brokerAuth %+v, want none (the Rewrite sets the one credential)", b, a)
		}
	}
}

// TestBrokerAuthRotation: a PUT refused with the current password is sent
// again, body and all, with the next; the next is kept for later calls and
// the gauge follows; when both are refused the call fails with a 502
// naming the two credentials, never the broker's 401.
func TestBrokerAuthRotation(t *testing.T) {
	br := &authBroker{accept: basicHeader("u", "next")[0]}
	srv := httptest.NewServer(br)
	defer srv.Close()
	m, err := proxytest.RegisteredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newBrokerAuth(&config.Broker{Name: "b", Username: "u", Password: "cur", NextPassword: "next"}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	a.Start(m, nil)
	put := func(body string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/v2/service_instances/i", strings.NewReader(body))
		return a.RoundTrip(req)
	}
	res, err := put(`{"a":1}`)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("first PUT: %v %v", res, err)
	}
	res.Body.Close()
	cur, next := basicHeader("u", "cur")[0], basicHeader("u", "next")[0]
	if got, want := br.take(), []string{cur + ` {"a":1}`, next + ` {"a":1}`}; !equalStrings(got, want) {
		t.Errorf("broker saw %q, want %q", got, want)
	}
	if v := gaugeValue(m, "b", "next"); v != 1 {
		t.Errorf(`credential{which="next"} = %v, want 1`, v)
	}
	res, err = put(`{"a":2}`)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("second PUT: %v %v", res, err)
	}
	res.Body.Close()
	if got, want := br.take(), []string{next + ` {"a":2}`}; !equalStrings(got, want) {
		t.Errorf("after the switch the broker saw %q, want %q (the next credential first)", got, want)
	}
	br.mu.Lock()
	br.accept = "neither"
	br.mu.Unlock()
	_, err = put(`{"a":3}`)
	var af *authFailed
	if !errors.As(err, &af) || af.status != http.StatusBadGateway || !strings.Contains(af.said, "refused both credentials") {
		t.Errorf("both refused: err = %v, want a 502 saying both credentials were refused", err)
	}
	if got := br.take(); len(got) != 2 {
		t.Errorf("both refused: the broker saw %d requests, want 2", len(got))
	}
}

// TestBrokerAuthBodyNotReplayable: a request whose body cannot be had again
// is not retried.
func TestBrokerAuthBodyNotReplayable(t *testing.T) {
	br := &authBroker{accept: basicHeader("u", "next")[0]}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a := newBrokerAuth(&config.Broker{Name: "b", Username: "u", Password: "cur", NextPassword: "next"}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPut, srv.URL, io.NopCloser(bytes.NewReader([]byte("{}"))))
	req.ContentLength, req.GetBody = 2, nil
	_, err := a.RoundTrip(req)
	var af *authFailed
	if !errors.As(err, &af) || !strings.Contains(af.said, "could not be sent a second time") {
		t.Errorf("err = %v, want a refusal saying the body could not be sent again", err)
	}
	if got := br.take(); len(got) != 1 {
		t.Errorf("broker saw %d requests, want 1", len(got))
	}
}

// TestBrokerAuthBearerFile: the file's token is sent; a 401 reads the
// file again, and a new token there is sent once.
func TestBrokerAuthBearerFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("two\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	br := &authBroker{accept: "Bearer two"}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a := newBrokerAuth(&config.Broker{Name: "b", Auth: &config.BrokerAuth{Type: "bearer", TokenFile: file, Token: "one"}},
		http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	res, err := a.RoundTrip(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("GET: %v %v", res, err)
	}
	res.Body.Close()
	if got, want := br.take(), []string{"Bearer one ", "Bearer two "}; !equalStrings(got, want) {
		t.Errorf("broker saw %q, want %q", got, want)
	}
}

// tokenServer is an OAuth2 token endpoint on loopback. It issues "tok"
// (for an hour) unless answer is set, which then answers each request;
// hang makes it hold every request until the request ends.
type tokenServer struct {
	srv      *httptest.Server
	requests atomic.Int32
	mu       sync.Mutex
	answer   http.HandlerFunc
	hang     bool
	stop     chan struct{} // closed when the test ends: no request hangs on
}

func newTokenServer(t *testing.T) *tokenServer {
	ts := &tokenServer{stop: make(chan struct{})}
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.requests.Add(1)
		_ = r.ParseForm() // the body read, the server sees the client hang up (r.Context)
		ts.mu.Lock()
		answer, hang := ts.answer, ts.hang
		ts.mu.Unlock()
		switch {
		case hang:
			select {
			case <-r.Context().Done():
			case <-ts.stop:
			}
		case answer != nil:
			answer(w, r)
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"access_token":"tok","token_type":"Bearer","expires_in":3600}`)
		}
	}))
	t.Cleanup(ts.srv.Close)
	t.Cleanup(func() { close(ts.stop) }) // first
	return ts
}

func (ts *tokenServer) set(hang bool, answer http.HandlerFunc) {
	ts.mu.Lock()
	ts.answer, ts.hang = answer, hang
	ts.mu.Unlock()
}

// oauthAuth is the brokerAuth of broker "b" with the token endpoint
// tokenURL and timeout, and the metrics it counts its fetches on.
func oauthAuth(t *testing.T, tokenURL string, timeout time.Duration) (*brokerAuth, *metrics.Metrics) {
	m, err := proxytest.RegisteredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	a := newBrokerAuth(&config.Broker{Name: "b", Timeout: timeout, Auth: &config.BrokerAuth{Type: "oauth2", TokenURL: tokenURL,
		ClientID: "gw", ClientSecret: "client-s3cret"}}, http.DefaultTransport, nil, slog.New(slog.DiscardHandler))
	a.Start(m, nil)
	return a, m
}

func tokenFetches(m *metrics.Metrics, outcome string) float64 {
	return proxytest.SeriesValue(m, "osb_gateway_broker_token_fetches_total", map[string]string{"broker": "b", "outcome": outcome})
}

// TestBrokerAuthTokenEndpointFailures: no token, no call; what the token
// endpoint did is said accurately (a refused connection is not "not a
// token", garbage is not "could not be reached"), with 502 for a read and
// 429 for a mutating call (the broker made nothing: no orphan mitigation),
// and never where the endpoint is, nor its answer's body; the log and span
// text (Error) names the endpoint, without its query.
func TestBrokerAuthTokenEndpointFailures(t *testing.T) {
	ts := newTokenServer(t)
	dead := "http://" + osbtest.DeadAddr(t)
	answer := func(status int, ctype, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", ctype)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}
	}
	const html = "text/html; charset=utf-8"
	for _, c := range []struct {
		name, endpoint string
		answer         http.HandlerFunc
		outcome, said  string
	}{
		{"refuses connections", dead, nil, tokenUnreachable,
			"was not called: its OAuth2 token endpoint could not be reached: it refused the connection"},
		{"an HTML page", ts.srv.URL, answer(200, html, "<html><body>login</body></html>"), tokenNotAToken,
			"was not called: its OAuth2 token endpoint answered something that is not a token: invalid character '<' looking for beginning of value"},
		{"JSON without access_token", ts.srv.URL, answer(200, "application/json", `{"token_type":"Bearer"}`), tokenNotAToken,
			"was not called: its OAuth2 token endpoint answered something that is not a token: it holds no access_token"},
		{"the client credentials refused", ts.srv.URL, answer(401, "application/json", `{"error":"invalid_client","error_description":"client-s3cret is wrong"}`), tokenRefused,
			"was not called: its OAuth2 token endpoint refused the gateway's client credentials: it answered 401 invalid_client (brokers[].auth.client_id, client_secret_file, scopes)"},
		{"a 500", ts.srv.URL, answer(500, "application/json", `{"error":"server_error","error_description":"client-s3cret"}`), tokenFailed,
			"was not called: its OAuth2 token endpoint failed: it answered 500 server_error"},
		{"an HTML error page", ts.srv.URL, answer(502, html, "<html>bad gateway at 10.1.2.3</html>"), tokenFailed,
			"was not called: its OAuth2 token endpoint failed: it answered 502"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ts.set(false, c.answer)
			br := &authBroker{}
			srv := httptest.NewServer(br)
			defer srv.Close()
			a, m := oauthAuth(t, c.endpoint+"/token?tenant=x", 5*time.Second)
			req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
			_, err := a.RoundTrip(req)
			var af *authFailed
			if !errors.As(err, &af) || af.status != http.StatusBadGateway || !af.noToken {
				t.Fatalf("err = %#v, want a 502 for want of a token", err)
			}
			if af.said != c.said {
				t.Errorf("said\n %q, want\n %q", af.said, c.said)
			}
			if got := af.statusFor(rules.Provision); got != http.StatusTooManyRequests {
				t.Errorf("a provision's status %d, want 429", got)
			}
			if got := af.statusFor(rules.InstanceLastOperation); got != http.StatusBadGateway {
				t.Errorf("a poll's status %d, want 502", got)
			}
			u, _ := url.Parse(c.endpoint)
			for _, leak := range []string{u.Host, u.Port(), "127.0.0.1", "10.1.2.3", "s3cret", "tenant=x", "http"} {
				if strings.Contains(af.said, leak) {
					t.Errorf("said %q holds %q", af.said, leak)
				}
			}
			if want := "OAuth2 token endpoint " + c.endpoint + "/token: "; !strings.HasPrefix(err.Error(), want) {
				t.Errorf("Error() = %q, want it to start %q (for the log and the span)", err.Error(), want)
			}
			if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "tenant=x") {
				t.Errorf("Error() = %q shows the secret or the query", err.Error())
			}
			if got := br.take(); len(got) != 0 {
				t.Errorf("broker saw %q, want nothing", got)
			}
			if n := tokenFetches(m, c.outcome); n != 1 {
				t.Errorf("token fetches{outcome=%q} = %v, want 1", c.outcome, n)
			}
		})
	}
}

// TestBrokerAuthHangingTokenEndpoint is the regression test of a hanging
// token endpoint serialising every call to its broker: four calls with a
// timeout T waited 2T, 4T, 6T and 8T (one fetch after the other, each
// trying two ways to send the client credentials) and got 503. Now they
// share one fetch, each leaves at its own deadline with a 504 that names
// no address, the endpoint gets one request, and once it answers again
// the next call gets a token.
func TestBrokerAuthHangingTokenEndpoint(t *testing.T) {
	const T = time.Second
	ts := newTokenServer(t)
	ts.set(true, nil)
	br := &authBroker{accept: "Bearer tok"}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a, m := oauthAuth(t, ts.srv.URL+"/token", T)
	call := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/v2/service_instances/i/last_operation", nil)
		res, err := a.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	start := time.Now()
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeoutCause(context.Background(), T, core.ErrBrokerTimeout)
			defer cancel()
			errs[i] = call(ctx)
		}()
	}
	wg.Wait()
	if took := time.Since(start); took >= 2*T {
		t.Errorf("the four calls took %s, want each within its timeout %s (less than %s)", took, T, 2*T)
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("the token endpoint got %d requests, want 1 (one fetch, shared)", n)
	}
	for i, err := range errs {
		var af *authFailed
		if !errors.As(err, &af) || af.status != http.StatusGatewayTimeout {
			t.Errorf("call %d: %v, want a 504", i, err)
			continue
		}
		if want := "was not called: its OAuth2 token endpoint did not answer within 1s"; af.said != want {
			t.Errorf("call %d said %q, want %q", i, af.said, want)
		}
		if u, _ := url.Parse(ts.srv.URL); strings.Contains(af.said, u.Host) || strings.Contains(af.said, u.Port()) {
			t.Errorf("call %d said %q, which names the token endpoint", i, af.said)
		}
	}
	// The fetch ends at its own deadline (the broker's timeout), counted.
	proxytest.WaitFor(t, func() bool { return tokenFetches(m, tokenNoAnswer) == 1 })
	ts.set(false, nil)
	if err := call(context.Background()); err != nil {
		t.Fatalf("after the token endpoint recovered: %v", err)
	}
	if got := br.take(); len(got) != 1 || got[0] != "Bearer tok " {
		t.Errorf("broker saw %q, want one call with the token", got)
	}
	if n := ts.requests.Load(); n != 2 {
		t.Errorf("the token endpoint got %d requests, want 2", n)
	}
}

// TestBrokerAuthTokenFetchOutlivesItsFirstCaller: the call that started a
// fetch leaves at its deadline, and the fetch goes on for a call that
// waits longer: the token endpoint's answer after the first caller left
// serves the second, with no second request.
func TestBrokerAuthTokenFetchOutlivesItsFirstCaller(t *testing.T) {
	ts := newTokenServer(t)
	release := make(chan struct{})
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	ts.set(false, func(w http.ResponseWriter, r *http.Request) {
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"access_token":"tok","expires_in":3600}`)
	})
	br := &authBroker{accept: "Bearer tok"}
	srv := httptest.NewServer(br)
	defer srv.Close()
	a, _ := oauthAuth(t, ts.srv.URL+"/token", time.Minute)
	call := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		res, err := a.RoundTrip(req)
		if err == nil {
			res.Body.Close()
		}
		return err
	}
	first, cancel := context.WithCancelCause(context.Background())
	firstErr := make(chan error, 1)
	go func() { firstErr <- call(first) }()
	proxytest.WaitFor(t, func() bool { return ts.requests.Load() == 1 })
	second := make(chan error, 1)
	go func() { second <- call(context.Background()) }()
	cancel(core.ErrBrokerTimeout) // the first caller's timeout passes
	var af *authFailed
	select {
	case err := <-firstErr:
		if !errors.As(err, &af) || af.status != http.StatusGatewayTimeout {
			t.Errorf("first call: %v, want a 504", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first call did not leave when its timeout passed")
	}
	once.Do(func() { close(release) })
	if err := <-second; err != nil {
		t.Errorf("second call: %v, want the token the fetch got after the first call left", err)
	}
	if n := ts.requests.Load(); n != 1 {
		t.Errorf("the token endpoint got %d requests, want 1", n)
	}
}

// TestBrokerAuthTokenWaitPlatformGone: a call whose platform went away
// while it waited for a token ends with the context's cause, not a 504:
// the upstream stage records it as 499.
func TestBrokerAuthTokenWaitPlatformGone(t *testing.T) {
	ts := newTokenServer(t)
	ts.set(true, nil)
	a, _ := oauthAuth(t, ts.srv.URL, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:1/", nil)
	done := make(chan error, 1)
	go func() {
		_, err := a.RoundTrip(req)
		done <- err
	}()
	proxytest.WaitFor(t, func() bool { return ts.requests.Load() == 1 })
	cancel()
	var af *authFailed
	if err := <-done; !errors.Is(err, context.Canceled) || errors.As(err, &af) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func gaugeValue(m *metrics.Metrics, broker, which string) float64 {
	return proxytest.SeriesValue(m, "osb_gateway_broker_credential", map[string]string{"broker": broker, "which": which})
}

// TestBrokerAuthReloadKeepsTheCredentialThatWorked: a reload that builds
// the broker's upstream again starts with the credential in use before
// when the new settings still hold it as the next one, and the gauge goes
// when the second credential does.
func TestBrokerAuthReloadKeepsTheCredentialThatWorked(t *testing.T) {
	m, err := proxytest.RegisteredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	build := func(b config.Broker, prev *Upstream) *Upstream {
		b.Name, b.URL, b.Timeout = "b", "http://127.0.0.1:1", 5e9
		u, err := New(&b, log, nil, nil, "", Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		if u.BrokerAuth != nil {
			u.BrokerAuth.Start(m, prev)
		}
		return u
	}
	old := build(config.Broker{Username: "u", Password: "cur", NextPassword: "next"}, nil)
	old.BrokerAuth.worked(credentialNext)
	kept := build(config.Broker{Username: "u", Password: "cur", NextPassword: "next", Timeout: 7e9}, old)
	if got := kept.BrokerAuth.using.Load(); got != credentialNext {
		t.Errorf("after a reload with the same credentials, using %d, want next", got)
	}
	moved := build(config.Broker{Username: "u", Password: "next", NextPassword: "later"}, kept)
	if got := moved.BrokerAuth.using.Load(); got != credentialCurrent {
		t.Errorf("after next became the password, using %d, want current", got)
	}
	if v := gaugeValue(m, "b", "current"); v != 1 {
		t.Errorf(`credential{which="current"} = %v, want 1`, v)
	}
}
