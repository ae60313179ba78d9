package e2e

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Credentials of the brokers (what the gateway sends) and of the tenants
// (what platforms send).
const (
	sampleUser = "sample-user"
	samplePass = "sample-s3cret"
	legacyUser = "legacy-user"
	legacyPass = "legacy-s3cret"
	apiUser    = "api-user"
	apiPass    = "api-s3cret"

	prodUser = "cf-prod-user"
	prodPass = "cf-prod-pass"
	devUser  = "cf-dev-user"
	devPass  = "cf-dev-pass"
)

// Route prefixes of gatewayYAML.
const (
	prodSample = "/cf-prod/sample"
	prodAPI    = "/cf-prod/brokerapi"
	prodLegacy = "/cf-prod/legacy"
	devSample  = "/dev/shared-sample"
	devAPI     = "/cf-dev/brokerapi"
)

// apiBase is the path the brokerapi broker is served under.
const apiBase = "/osb"

// asyncDelay is how long asynchronous operations stay "in progress" on the
// brokers' clock; pollStep is how far the clock moves between two polls.
const (
	asyncDelay = 100 * time.Millisecond
	pollStep   = 40 * time.Millisecond
	maxPolls   = 20
)

// gatewayYAML puts the three brokers behind the gateway for two tenants.
// sample and brokerapi accept 2.14 and later; legacy accepts anything and is
// sent at most 2.8. The tests move the brokers' clock between two polls, not
// the gateway's, so the sample broker's "in progress" answers (Retry-After 1)
// are not reused for the next polls (poll.min_interval -1s).
const gatewayYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
    poll: {min_interval: -1s}
  - name: brokerapi
    url: ${API_URL}/osb/
    username: api-user
    password: ${API_PASS}
    api_version: {min: "2.14", max: "2.17"}
    timeout: 10s
  - name: legacy
    url: ${LEGACY_URL}
    username: legacy-user
    password: ${LEGACY_PASS}
    api_version: {max: "2.8"}
    timeout: 10s
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: sample}, {broker: brokerapi}, {broker: legacy}]
  - name: cf-dev
    credentials: [{username: cf-dev-user, password: cf-dev-pass}]
    routes: [{broker: sample, prefix: /dev/shared-sample}, {broker: brokerapi}]
`

// exchange is one request and its answer as seen on one side of the gateway.
type exchange struct {
	Method string
	Path   string // without route prefix or broker base path
	Query  string
	Status int
	Body   string

	header  http.Header // response header
	version string      // X-Broker-API-Version sent
	auth    string      // Authorization sent
}

// tap records every exchange passing through h. It serves both sides: in
// front of the gateway (what platforms see) and in front of each broker
// (what brokers see).
type tap struct {
	h     http.Handler
	strip string // leading path removed from recorded paths

	mu  sync.Mutex
	log []exchange
}

func (tp *tap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := &recorder{ResponseWriter: w}
	tp.h.ServeHTTP(rec, r)
	ex := exchange{
		Method: r.Method, Path: strings.TrimPrefix(r.URL.EscapedPath(), tp.strip), Query: r.URL.RawQuery,
		Status: rec.status, Body: rec.body.String(), header: w.Header().Clone(),
		version: r.Header.Get("X-Broker-API-Version"), auth: r.Header.Get("Authorization"),
	}
	if ex.Status == 0 {
		ex.Status = http.StatusOK
	}
	tp.mu.Lock()
	tp.log = append(tp.log, ex)
	tp.mu.Unlock()
}

// exchanges returns what passed so far.
func (tp *tap) exchanges() []exchange {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return append([]exchange(nil), tp.log...)
}

// last returns the latest exchange.
func (tp *tap) last(t *testing.T) exchange {
	t.Helper()
	log := tp.exchanges()
	if len(log) == 0 {
		t.Fatal("no request passed")
	}
	return log[len(log)-1]
}

// recorder captures the status and body written through it.
type recorder struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	r.body.Write(b)
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError lets http.ResponseController learn that a flush failed, as
// the gateway's guard does for a success the platform must get.
func (r *recorder) FlushError() error { return http.NewResponseController(r.ResponseWriter).Flush() }

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// env is one gateway in front of the three brokers, each on its own
// loopback listener, every hop tapped.
type env struct {
	clock  *osbtest.Clock
	sample *samplebroker.Broker
	legacy *samplebroker.Broker
	api    *apiBroker

	gateway *tap // platform side
	url     string
	brokers map[string]*tap // broker side, by broker name
}

// newEnv starts the brokers and the gateway for gatewayYAML.
func newEnv(t *testing.T) *env {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	e := &env{
		clock:   clk,
		sample:  samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now}),
		legacy:  samplebroker.New(samplebroker.Options{Username: legacyUser, Password: legacyPass, AsyncDelay: asyncDelay, Now: clk.Now, Legacy: true}),
		api:     newAPIBroker(clk.Now, asyncDelay),
		brokers: map[string]*tap{},
	}
	quiet := slog.New(slog.DiscardHandler)
	apiHandler := http.StripPrefix(apiBase, brokerapi.New(e.api, quiet, brokerapi.BrokerCredentials{Username: apiUser, Password: apiPass}))
	serve := func(name string, h http.Handler, strip string) string {
		tp := &tap{h: h, strip: strip}
		e.brokers[name] = tp
		srv := httptest.NewServer(tp)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	vars := map[string]string{
		"SAMPLE_URL":  serve("sample", e.sample, ""),
		"LEGACY_URL":  serve("legacy", e.legacy, ""),
		"API_URL":     serve("brokerapi", apiHandler, apiBase),
		"SAMPLE_PASS": samplePass,
		"LEGACY_PASS": legacyPass,
		"API_PASS":    apiPass,
	}
	cfg, err := config.Parse([]byte(gatewayYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: quiet, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	e.gateway = &tap{h: g}
	e.url = serveGateway(t, e.gateway)
	return e
}

// client is an OSB client for the route at prefix. An empty user sends no
// credentials.
func (e *env) client(t *testing.T, prefix string, v osb.APIVersion, user, pass string) osb.Client {
	t.Helper()
	cfg := osb.DefaultClientConfiguration()
	cfg.Name = strings.TrimPrefix(prefix, "/")
	cfg.URL = e.url + prefix
	cfg.APIVersion = v
	cfg.EnableAlphaFeatures = true
	cfg.TimeoutSeconds = 10
	if user != "" {
		cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: user, Password: pass}}
	}
	c, err := osb.NewClient(cfg)
	if err != nil {
		t.Fatalf("osb.NewClient: %v", err)
	}
	return c
}

// brokerCalls is how many requests reached each broker, by its tap and by
// the broker's own counter.
type brokerCalls struct {
	Sample, Legacy, API      int
	SampleCount, LegacyCount int64 // samplebroker.Broker.Count("")
	APIMethodCalls           int64 // apiBroker.Calls()
}

func (e *env) calls() brokerCalls {
	return brokerCalls{
		Sample: len(e.brokers["sample"].exchanges()), Legacy: len(e.brokers["legacy"].exchanges()),
		API:         len(e.brokers["brokerapi"].exchanges()),
		SampleCount: e.sample.Count(""), LegacyCount: e.legacy.Count(""), APIMethodCalls: e.api.Calls(),
	}
}

// wantStatus checks the status the platform got for its latest request.
func (e *env) wantStatus(t *testing.T, want int) {
	t.Helper()
	if got := e.gateway.last(t); got.Status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", got.Method, got.Path, got.Status, want, got.Body)
	}
}

// poll calls last until the operation is no longer in progress (or the
// broker answers 410 Gone), moving the brokers' clock by pollStep after
// every "in progress". It returns every answer and whether it ended in 410.
func (e *env) poll(t *testing.T, last func() (*osb.LastOperationResponse, error)) (answers []*osb.LastOperationResponse, gone bool) {
	t.Helper()
	for range maxPolls {
		res, err := last()
		if osb.IsGoneError(err) {
			return answers, true
		}
		if err != nil {
			t.Fatalf("last_operation: %v", err)
		}
		answers = append(answers, res)
		if res.State != osb.StateInProgress {
			return answers, false
		}
		e.clock.Advance(pollStep)
	}
	t.Fatalf("still in progress after %d polls", maxPolls)
	return nil, false
}
