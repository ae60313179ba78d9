package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/proxytest"
)

// protectYAML fronts one broker b (the sample broker's credentials) for two
// tenants, t1 and t2; ${PROTECT} holds the broker's protection keys.
const protectYAML = `
admin: {address: "off", token: "` + protectAdminToken + `"}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 5s
    validation: {without_catalog: forward}
    catalog: {ttl: 1m}
${PROTECT}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes: [{broker: b}]
`

const protectAdminToken = "protect-admin-token-0123456789"

// protectEnv is a gateway in front of one broker with protections, on an
// injected clock, with its store, metrics and audit records at hand.
type protectEnv struct {
	g       *Gateway
	gw      *httptest.Server
	st      store.Store
	clock   *osbtest.Clock
	metrics *Metrics
	reg     *prometheus.Registry
	audit   *recordingWriter
	admin   http.Handler
}

// newProtectEnv starts the gateway for protectYAML with the protection
// keys protect (indented as broker keys) in front of the broker at url.
func newProtectEnv(t *testing.T, url, protect string) *protectEnv {
	t.Helper()
	return newProtectEnvWith(t, url, protect, nil)
}

// newProtectEnvWith is newProtectEnv with the gateway's Options edited by
// edit (when not nil).
func newProtectEnvWith(t *testing.T, url, protect string, edit func(*Options)) *protectEnv {
	t.Helper()
	e := &protectEnv{clock: osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)), audit: &recordingWriter{}}
	vars := map[string]string{"URL": url}
	yaml := strings.Replace(protectYAML, "${PROTECT}", protect, 1) // keys, not a scalar
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	e.st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, e.clock.Now)
	e.reg = prometheus.NewRegistry()
	if e.metrics, err = NewMetrics(e.reg, e.clock.Now); err != nil {
		t.Fatal(err)
	}
	opts := Options{Logger: slog.New(slog.DiscardHandler), Now: e.clock.Now, Store: e.st, Metrics: e.metrics,
		Audit: &AuditOptions{Writer: e.audit}}
	if edit != nil {
		edit(&opts)
	}
	e.g, err = New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.g.Close(nil) })
	e.gw = httptest.NewServer(e.g)
	t.Cleanup(e.gw.Close)
	e.admin = newAdmin(NewSwitch(e.g), slog.New(slog.DiscardHandler), nil)
	return e
}

// request builds a call of tenant ("t1" or "t2") to path under its route.
func (e *protectEnv) request(t *testing.T, ctx context.Context, tenant, method, path, body string) *http.Request {
	t.Helper()
	var in io.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.gw.URL+"/"+tenant+"/b"+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(tenant+"-user", tenant+"-pass")
	req.Header.Set("X-Broker-API-Version", "2.15")
	return req
}

// callReply is the answer to a call, read whole.
type callReply struct {
	status int
	header http.Header
	body   string
	err    error
}

// send makes a call and reads its callReply.
func (e *protectEnv) send(t *testing.T, tenant, method, path, body string) callReply {
	t.Helper()
	return roundTrip(e.request(t, context.Background(), tenant, method, path, body))
}

// sendInBackground makes a call in a goroutine; its callReply comes on the
// channel.
func (e *protectEnv) sendInBackground(t *testing.T, ctx context.Context, tenant, method, path string) <-chan callReply {
	t.Helper()
	req := e.request(t, ctx, tenant, method, path, "")
	ch := make(chan callReply, 1)
	go func() { ch <- roundTrip(req) }()
	return ch
}

func roundTrip(req *http.Request) callReply {
	r := proxytest.Do(req)
	return callReply{status: r.Status, header: r.Header, body: r.Body, err: r.Err}
}

// locks returns the operation locks in the store.
func (e *protectEnv) locks(t *testing.T) []store.Lock {
	t.Helper()
	ls, err := e.st.List(context.Background(), store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// brokerRow returns broker b's row of GET /admin/brokers.
func (e *protectEnv) brokerRow(t *testing.T) map[string]any {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/admin/brokers", nil)
	req.Header.Set("Authorization", "Bearer "+protectAdminToken)
	rec := httptest.NewRecorder()
	e.admin.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /admin/brokers: %d %s", rec.Code, rec.Body)
	}
	var out struct {
		Brokers []map[string]any `json:"brokers"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Brokers) != 1 {
		t.Fatalf("GET /admin/brokers: %v %s", err, rec.Body)
	}
	return out.Brokers[0]
}

// queueCounts returns broker b's calls in flight and queued.
func (e *protectEnv) queueCounts() (int, int) { return e.g.brokerProtect["b"].Queue.Counts() }

// breakerState returns broker b's breaker state as /admin/brokers names it.
func (e *protectEnv) breakerState() string {
	return e.g.brokerProtect["b"].Breaker.Status().State
}

// metric returns the value of one series on the metrics page ("" when
// absent), e.g. `osb_gateway_breaker_state{broker="b"}`.
func (e *protectEnv) metric(t *testing.T, series string) string {
	t.Helper()
	for _, l := range strings.Split(scrape(t, promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{})), "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			return v
		}
	}
	return ""
}

// records returns the audit records written so far.
func (e *protectEnv) records() []recordSummary {
	e.audit.mu.Lock()
	defer e.audit.mu.Unlock()
	out := make([]recordSummary, len(e.audit.recs))
	for i, r := range e.audit.recs {
		out[i] = recordSummary{Tenant: r.Tenant, Endpoint: r.Endpoint, Status: r.Status, Protection: r.Protection}
	}
	return out
}

// sortRecords compares record summaries in any order.
var sortRecords = cmpopts.SortSlices(func(a, b recordSummary) bool {
	return a.Tenant+" "+a.Endpoint+" "+a.Protection < b.Tenant+" "+b.Endpoint+" "+b.Protection
})

// httptestServer serves h on loopback until the test ends.
func httptestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

// recordSummary is what the protect tests check of an audit record.
type recordSummary struct {
	Tenant, Endpoint string
	Status           int
	Protection       string
}
