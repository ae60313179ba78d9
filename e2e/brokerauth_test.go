package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// authEnv is one gateway in front of the sample broker with the broker
// settings brokerYAML (indented as a list item's keys under brokers).
type authEnv struct {
	broker  *samplebroker.Broker
	reg     *prometheus.Registry
	url     string
	calls   *tap // the broker side
	dir     string
	gateway *proxy.Gateway
}

func newAuthEnv(t *testing.T, brokerYAML string) *authEnv {
	t.Helper()
	return newAuthEnvTimeout(t, 10*time.Second, brokerYAML)
}

// newAuthEnvTimeout is newAuthEnv with brokers[].timeout timeout.
func newAuthEnvTimeout(t *testing.T, timeout time.Duration, brokerYAML string) *authEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := &authEnv{dir: t.TempDir(), reg: prometheus.NewRegistry()}
	e.broker = samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: -1, Now: clk.Now})
	e.calls = &tap{h: e.broker}
	bs := httptest.NewServer(e.calls)
	t.Cleanup(bs.Close)
	y := `
admin: {address: "off"}
brokers:
  - name: b
    url: ` + bs.URL + `
    timeout: ` + timeout.String() + `
` + brokerYAML + `
tenants:
  - name: t
    credentials: [{username: platform-user, password: platform-pass}]
    routes: [{broker: b}]
`
	cfg, err := config.Parse([]byte(y), config.Options{BaseDir: e.dir})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	m, err := proxy.NewMetrics(e.reg, nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Metrics: m, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e.gateway = g
	e.url = serveGateway(t, g)
	return e
}

func (e *authEnv) client(t *testing.T) osb.Client {
	t.Helper()
	cfg := osb.DefaultClientConfiguration()
	cfg.Name, cfg.URL, cfg.APIVersion, cfg.TimeoutSeconds = "b", e.url+"/t/b", osb.LatestAPIVersion(), 10
	cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: "platform-user", Password: "platform-pass"}}
	c, err := osb.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// authLifecycle provisions, binds, unbinds and deprovisions instance id.
func authLifecycle(c osb.Client, id string) error {
	plan := samplebroker.PlanSyncID
	if _, err := c.GetCatalog(); err != nil {
		return fmt.Errorf("catalog: %w", err)
	}
	if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: plan,
		OrganizationGUID: orgGUID, SpaceGUID: spaceGUID, Parameters: map[string]any{"size": "small"}}); err != nil {
		return fmt.Errorf("provision: %w", err)
	}
	if _, err := c.Bind(&osb.BindRequest{BindingID: id + "-k", InstanceID: id, ServiceID: serviceID, PlanID: plan}); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{BindingID: id + "-k", InstanceID: id, ServiceID: serviceID, PlanID: plan}); err != nil {
		return fmt.Errorf("unbind: %w", err)
	}
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: serviceID, PlanID: plan}); err != nil {
		return fmt.Errorf("deprovision: %w", err)
	}
	return nil
}

// TestBrokerPasswordRotationUnderLoad rotates the sample broker's password
// while four platforms run lifecycles through the gateway, which holds the
// old password and the next: no call fails, the platform never sees the
// broker's 401, and the gauge shows the next credential in use.
func TestBrokerPasswordRotationUnderLoad(t *testing.T) {
	const next = "sample-n3xt"
	e := newAuthEnv(t, `    username: `+sampleUser+`
    password: `+samplePass+`
    next_password: `+next)
	const workers, rounds, rotateAfter = 4, 12, 10
	var done atomic.Int32
	rotated := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.client(t)
			for i := range rounds {
				if err := authLifecycle(c, fmt.Sprintf("w%d-%d", w, i)); err != nil {
					errs <- err
				}
				if done.Add(1) == rotateAfter {
					once.Do(func() { e.broker.SetCredentials(sampleUser, next); close(rotated) })
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("failed call: %v", err)
	}
	select {
	case <-rotated:
	default:
		t.Fatal("the password was never rotated")
	}
	refused := 0
	for _, x := range e.calls.exchanges() {
		if x.Status == http.StatusUnauthorized {
			refused++
		}
	}
	if refused == 0 {
		t.Error("the broker refused no call: the rotation was not exercised")
	}
	if got := gaugeOf(t, e.reg, "osb_gateway_broker_credential", "next"); got != 1 {
		t.Errorf(`osb_gateway_broker_credential{which="next"} = %v, want 1`, got)
	}
	if got := gaugeOf(t, e.reg, "osb_gateway_broker_credential", "current"); got != 0 {
		t.Errorf(`osb_gateway_broker_credential{which="current"} = %v, want 0`, got)
	}
	// Rotated back (the operator moved next to password and the broker
	// back): the gateway follows again.
	e.broker.SetCredentials(sampleUser, samplePass)
	if err := authLifecycle(e.client(t), "back"); err != nil {
		t.Errorf("after rotating back: %v", err)
	}
}

// gaugeOf is the value of metric's series whose "which" label is which
// (-1: none).
func gaugeOf(t *testing.T, reg *prometheus.Registry, metric, which string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "which" && l.GetValue() == which {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

// tokenEndpoint is an OAuth2 token endpoint for the client-credentials
// grant (RFC 6749 4.4): it checks the client and the grant and issues
// "tok-N" tokens valid for expiresIn seconds. hang makes it hold each
// request until the request ends (or the test does); garbage, when set,
// is its answer: 200, text/html.
type tokenEndpoint struct {
	id, secret string
	expiresIn  int
	issued     atomic.Int32
	scopes     atomic.Value // the last request's scope
	srv        *httptest.Server
	requests   atomic.Int32 // every request
	hang       atomic.Bool
	garbage    atomic.Pointer[string]
	stop       chan struct{} // closed when the test ends
}

func newTokenEndpoint(t *testing.T, id, secret string, expiresIn int) *tokenEndpoint {
	te := &tokenEndpoint{id: id, secret: secret, expiresIn: expiresIn, stop: make(chan struct{})}
	te.srv = httptest.NewServer(http.HandlerFunc(te.serve))
	t.Cleanup(te.srv.Close)
	t.Cleanup(func() { close(te.stop) }) // first: no request hangs on
	return te
}

func (te *tokenEndpoint) serve(w http.ResponseWriter, r *http.Request) {
	te.requests.Add(1)
	err := r.ParseForm() // the body read, r.Context ends when the gateway hangs up
	if te.hang.Load() {
		select {
		case <-r.Context().Done():
		case <-te.stop:
		}
		return
	}
	if g := te.garbage.Load(); g != nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, *g)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err != nil || r.Method != http.MethodPost || r.PostForm.Get("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != te.id || secret != te.secret {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":"invalid_client"}`)
		return
	}
	te.scopes.Store(r.PostForm.Get("scope"))
	n := te.issued.Add(1)
	_ = json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d", n), "token_type": "Bearer", "expires_in": te.expiresIn})
}

// current is the last token issued.
func (te *tokenEndpoint) current() string { return fmt.Sprintf("Bearer tok-%d", te.issued.Load()) }

func writeFile(t *testing.T, name, data string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBrokerOAuth2ClientCredentials: the gateway gets a token from a real
// token endpoint, reuses it while it is valid, fetches a new one once when
// the broker refuses it (a revoked token), and the platform sees no 401.
func TestBrokerOAuth2ClientCredentials(t *testing.T) {
	te := newTokenEndpoint(t, "gw-client", "client-s3cret", 3600)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret"), "client-s3cret\n")
	e := newAuthEnv(t, `    auth:
      type: oauth2
      token_url: `+te.srv.URL+`/oauth/token
      client_id: gw-client
      client_secret_file: `+filepath.Join(dir, "secret")+`
      scopes: [osb.read, osb.write]`)
	e.broker.SetAuthorization(func(h string) bool { return h != "" && h == te.current() })
	c := e.client(t)
	for i := range 3 {
		if err := authLifecycle(c, fmt.Sprintf("o%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n := te.issued.Load(); n != 1 {
		t.Errorf("token endpoint issued %d tokens for 3 lifecycles, want 1 (cached)", n)
	}
	if s, _ := te.scopes.Load().(string); s != "osb.read osb.write" {
		t.Errorf("scope = %q, want %q", s, "osb.read osb.write")
	}
	// The broker revokes the token: the next call gets 401, the gateway
	// fetches a new token once, and the call succeeds.
	e.broker.SetAuthorization(func(h string) bool { return h != "" && h == "Bearer tok-2" })
	if err := authLifecycle(c, "after-revoke"); err != nil {
		t.Fatal(err)
	}
	if n := te.issued.Load(); n != 2 {
		t.Errorf("token endpoint issued %d tokens, want 2 (one refresh after the 401)", n)
	}
}

// TestBrokerOAuth2RefreshesBeforeExpiry: a token that expires within
// oauth2's expiry delta is replaced before it is sent, so the broker (which
// accepts only the newest token) never refuses a call.
func TestBrokerOAuth2RefreshesBeforeExpiry(t *testing.T) {
	te := newTokenEndpoint(t, "gw-client", "client-s3cret", 5) // within the 10s delta: expired on arrival
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret"), "client-s3cret")
	e := newAuthEnv(t, `    auth: {type: oauth2, token_url: "`+te.srv.URL+`", client_id: gw-client, client_secret_file: `+filepath.Join(dir, "secret")+`}`)
	e.broker.SetAuthorization(func(h string) bool { return h == te.current() })
	if err := authLifecycle(e.client(t), "x"); err != nil {
		t.Fatal(err)
	}
	if n := te.issued.Load(); n < 5 {
		t.Errorf("token endpoint issued %d tokens for 5 calls with near-expired tokens, want one per call", n)
	}
	for _, x := range e.calls.exchanges() {
		if x.Status == http.StatusUnauthorized {
			t.Errorf("broker refused %s %s: the token should have been fresh", x.Method, x.Path)
		}
	}
}

// TestBrokerBearerTokenFile: the gateway sends the token file's token;
// when the broker refuses it, the file is read again and the call sent
// once more with the new token.
func TestBrokerBearerTokenFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	writeFile(t, file, "bearer-one\n")
	e := newAuthEnv(t, `    auth: {type: bearer, token_file: `+file+`}`)
	var want atomic.Value
	want.Store("Bearer bearer-one")
	e.broker.SetAuthorization(func(h string) bool { return h == want.Load().(string) })
	c := e.client(t)
	if err := authLifecycle(c, "a"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, file, "bearer-two\n")
	want.Store("Bearer bearer-two")
	if err := authLifecycle(c, "b"); err != nil {
		t.Fatal(err)
	}
	// A token the broker refuses and no new one in the file: 502, never
	// the broker's 401.
	want.Store("Bearer bearer-three")
	_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "c", ServiceID: serviceID, PlanID: samplebroker.PlanSyncID,
		OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	if he, ok := osb.IsHTTPError(err); !ok || he.StatusCode != http.StatusBadGateway || he.Description == nil ||
		!strings.Contains(*he.Description, "refused the gateway's bearer token") {
		t.Errorf("provision with a refused token: %v, want 502 saying the broker refused the token", err)
	}
}

// TestBrokerOAuth2TokenEndpointHangs: four platforms poll through a
// gateway whose broker's OAuth2 token endpoint hangs. They used to wait
// one after the other (2, 4, 6 and 8 times brokers[].timeout: one fetch
// at a time, each trying two ways to send the client credentials) and
// then read a 503 naming the endpoint's URL. Now the four share one fetch
// (one request to the endpoint), each answer is a 504 within the broker's
// timeout that names no address; an endpoint that answers garbage gets a
// 502 that says so; and once the endpoint answers again, a lifecycle
// runs.
func TestBrokerOAuth2TokenEndpointHangs(t *testing.T) {
	const T = time.Second
	te := newTokenEndpoint(t, "gw-client", "client-s3cret", 3600)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secret"), "client-s3cret")
	e := newAuthEnvTimeout(t, T, `    auth: {type: oauth2, token_url: "`+te.srv.URL+`/oauth/token", client_id: gw-client, client_secret_file: `+filepath.Join(dir, "secret")+`}`)
	e.broker.SetAuthorization(func(h string) bool { return h != "" && h == te.current() })
	te.hang.Store(true)
	host := strings.TrimPrefix(te.srv.URL, "http://")
	_, port, _ := strings.Cut(host, ":")
	poll := func(id string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, e.url+"/t/b/v2/service_instances/"+id+"/last_operation", nil)
		req.SetBasicAuth("platform-user", "platform-pass")
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer res.Body.Close()
		var body strings.Builder
		_, _ = io.Copy(&body, res.Body)
		return res.StatusCode, body.String()
	}
	withheld := func(what, body string) {
		t.Helper()
		for _, leak := range []string{host, port, "127.0.0.1", "/oauth/token", "s3cret"} {
			if strings.Contains(body, leak) {
				t.Errorf("%s: the answer holds %q: %s", what, leak, body)
			}
		}
	}
	start := time.Now()
	type answer struct {
		status int
		body   string
	}
	answers := make([]answer, 4)
	var wg sync.WaitGroup
	for i := range answers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			answers[i].status, answers[i].body = poll(fmt.Sprintf("h%d", i))
		}()
	}
	wg.Wait()
	if took := time.Since(start); took >= 2*T {
		t.Errorf("the four polls took %s, want each answered within the broker's timeout %s (less than %s)", took, T, 2*T)
	}
	if n := te.requests.Load(); n != 1 {
		t.Errorf("the token endpoint got %d requests while it hung, want 1 (one fetch for the four calls)", n)
	}
	for i, a := range answers {
		const want = `{"description":"broker \"b\" was not called: its OAuth2 token endpoint did not answer within 1s"}`
		if a.status != http.StatusGatewayTimeout || strings.TrimSpace(a.body) != want {
			t.Errorf("poll %d: %d %s, want 504 %s", i, a.status, a.body, want)
		}
		withheld(fmt.Sprintf("poll %d", i), a.body)
	}
	// The fetch ends at its own deadline (one broker timeout), counted.
	waitFor(t, "the token fetch to end", func() bool { return counterOf(t, e.reg, "osb_gateway_broker_token_fetches_total", "timeout") == 1 })

	garbage := "<html><body>Sign in to the corporate proxy at 10.9.8.7</body></html>"
	te.hang.Store(false)
	te.garbage.Store(&garbage)
	status, body := poll("g")
	if want := "its OAuth2 token endpoint answered something that is not a token: invalid character '<' looking for beginning of value"; status != http.StatusBadGateway || !strings.Contains(body, want) {
		t.Errorf("garbage: %d %s, want 502 saying %q", status, body, want)
	}
	withheld("garbage", body)
	if strings.Contains(body, "10.9.8.7") {
		t.Errorf("garbage: the answer quotes the token endpoint's body: %s", body)
	}

	te.garbage.Store(nil)
	if err := authLifecycle(e.client(t), "recovered"); err != nil {
		t.Errorf("after the token endpoint recovered: %v", err)
	}
	for _, x := range e.calls.exchanges() {
		if x.Status == http.StatusUnauthorized {
			t.Errorf("the broker refused %s %s", x.Method, x.Path)
		}
	}
}

// counterOf is the value of counter metric's series whose "outcome" label
// is outcome (0: none).
func counterOf(t *testing.T, reg *prometheus.Registry, metric, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
