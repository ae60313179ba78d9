package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
)

// unavailableYAML fronts broker b1 for tenant t1 without filters and for
// tenant t2 with the probe's filters: one service allowed, one plan
// denied.
const unavailableYAML = `
admin: {address: "off", token: "` + testAdminToken + `"}
brokers:
  - name: b1
    url: ${B1_URL}
    catalog: {ttl: 1m}
    validation: {requests: "${REQUESTS}", without_catalog: "${WITHOUT}"}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b1}]
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes:
      - broker: b1
        services: {allow: ["mysql"]}
        plans: {deny: ["*/large"]}
`

// logCounter is a slog handler that counts the records whose message
// starts with prefix.
type logCounter struct {
	prefix string
	n      atomic.Int64
}

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.prefix) {
		h.n.Add(1)
	}
	return nil
}
func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logCounter) WithGroup(string) slog.Handler      { return h }

// unavailableGateway serves unavailableYAML for broker cb with the given
// validation.requests and validation.without_catalog, on clock, logging to
// log, with the metrics stage counting on a registry it returns.
func unavailableGateway(t *testing.T, cb *catalogBroker, clock *osbtest.Clock, requests, without string, log *logCounter) (*Gateway, *httptest.Server, *prometheus.Registry) {
	t.Helper()
	vars := map[string]string{"B1_URL": cb.URL, "REQUESTS": requests, "WITHOUT": without}
	cfg, err := config.Parse([]byte(unavailableYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(log), Now: clock.Now, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv, reg
}

// osbCalls are the mutating calls of the table below, by name.
var osbCalls = map[string]struct{ method, path, body string }{
	"provision":           {"PUT", "/v2/service_instances/i1", `{"service_id":"svc-mysql","plan_id":"p-small","organization_guid":"o","space_guid":"s"}`},
	"provision denied":    {"PUT", "/v2/service_instances/i1", `{"service_id":"svc-mysql","plan_id":"p-large","organization_guid":"o","space_guid":"s"}`},
	"provision hidden":    {"PUT", "/v2/service_instances/i1", `{"service_id":"svc-redis","plan_id":"p-cache","organization_guid":"o","space_guid":"s"}`},
	"provision unknown":   {"PUT", "/v2/service_instances/i1", `{"service_id":"svc-nope","plan_id":"p-nope","organization_guid":"o","space_guid":"s"}`},
	"provision malformed": {"PUT", "/v2/service_instances/i1", `{"service_id":`},
	"update":              {"PATCH", "/v2/service_instances/i1", `{"service_id":"svc-mysql","plan_id":"p-small"}`},
	"bind":                {"PUT", "/v2/service_instances/i1/service_bindings/b1", `{"service_id":"svc-mysql","plan_id":"p-small"}`},
	"deprovision":         {"DELETE", "/v2/service_instances/i1?service_id=svc-mysql&plan_id=p-small", ""},
	"unbind":              {"DELETE", "/v2/service_instances/i1/service_bindings/b1?service_id=svc-mysql&plan_id=p-small", ""},
}

// osbCall sends one of osbCalls as tenant t1 or t2 at 2.16.
func osbCall(t *testing.T, gw *httptest.Server, tenant, name string) (*http.Response, string) {
	t.Helper()
	c, ok := osbCalls[name]
	if !ok {
		t.Fatalf("no call %q", name)
	}
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	// Each tenant calls on an instance of its own: an instance belongs to
	// the tenant that made it (proxy/internal/owner/owner.go).
	path := strings.Replace(c.path, "/service_instances/i1", "/service_instances/i1-"+tenant, 1)
	return do(t, c.method, gw.URL+"/"+tenant+"/b1"+path, tenant+"-user", tenant+"-pass", "2.16", body)
}

// TestCatalogUnavailableFailsClosed is the probe's fault: with the
// broker's catalog answering 500 on a fresh gateway, a route with filters
// forwarded the plan it denies (202) and the service it hides (201), and
// invalid bodies reached the broker. Now every mutating call on a
// filtered route gets 503; on an unfiltered route the calls checked
// against the catalog follow validation.without_catalog; with requests
// off and no filter nothing is fetched.
func TestCatalogUnavailableFailsClosed(t *testing.T) {
	type row struct {
		tenant, call string
		status       int    // 201: reached the broker
		decision     string // counted in osb_gateway_catalog_unavailable_total
	}
	const refused, forwarded = catalog.CatalogRefused, catalog.CatalogForwarded
	filtered := func(decision string) []row {
		var rows []row
		for _, c := range []string{"provision", "provision denied", "provision hidden", "provision unknown", "update", "bind", "deprovision", "unbind"} {
			rows = append(rows, row{"t2", c, 503, decision})
		}
		return rows
	}
	tests := []struct {
		name, requests, without string
		rows                    []row
		fetches                 int64
		golden                  map[string]string // row call → golden file
	}{
		{"enforce, refuse", config.ModeEnforce, config.WithoutCatalogRefuse, append(filtered(refused),
			row{"t1", "provision", 503, refused},
			row{"t1", "provision unknown", 503, refused},
			row{"t1", "update", 503, refused},
			row{"t1", "bind", 503, refused},
			row{"t1", "provision malformed", 400, ""}, // refused by the rules that need no catalog
			row{"t1", "deprovision", 201, ""},         // checked without the catalog
			row{"t1", "unbind", 201, ""},
		), 1, map[string]string{"t2 provision denied": "catalog_unavailable_filtered", "t1 provision": "catalog_unavailable_refused"}},
		{"enforce, forward", config.ModeEnforce, config.WithoutCatalogForward, append(filtered(refused),
			row{"t1", "provision", 201, forwarded},
			row{"t1", "provision unknown", 201, forwarded},
			row{"t1", "update", 201, forwarded},
			row{"t1", "bind", 201, forwarded},
			row{"t1", "provision malformed", 400, ""},
			row{"t1", "deprovision", 201, ""},
			row{"t1", "unbind", 201, ""},
		), 1, nil},
		{"report, refuse", config.ModeReport, config.WithoutCatalogRefuse, append(filtered(refused),
			row{"t1", "provision", 503, refused},
			row{"t1", "provision malformed", 503, refused}, // report: the rules refuse nothing
			row{"t1", "deprovision", 201, ""},
		), 1, nil},
		{"requests off", config.ModeOff, config.WithoutCatalogRefuse, append(filtered(refused),
			row{"t1", "provision", 201, ""}, // neither rules nor filters need the catalog
			row{"t1", "provision unknown", 201, ""},
			row{"t1", "bind", 201, ""},
		), 1, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cb := newCatalogBroker(t)
			cb.set(`{"description":"boom"}`, 500, 0)
			clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			_, gw, reg := unavailableGateway(t, cb, clock, tc.requests, tc.without, &logCounter{})
			want := map[string]int{}
			for _, r := range tc.rows {
				before := cb.others.Load()
				res, body := osbCall(t, gw, r.tenant, r.call)
				if res.StatusCode != r.status {
					t.Errorf("%s %s: %d, want %d: %s", r.tenant, r.call, res.StatusCode, r.status, body)
					continue
				}
				if reached := cb.others.Load() > before; reached != (r.status == 201) {
					t.Errorf("%s %s: broker reached = %v", r.tenant, r.call, reached)
				}
				if r.status == 503 {
					if !strings.Contains(body, `broker \"b1\"`) || !strings.Contains(body, "status 500") || !strings.Contains(body, "2026-01-01T00:00:05Z") {
						t.Errorf("%s %s: the description does not name the broker, the cause and the next fetch: %s", r.tenant, r.call, body)
					}
					if ra := res.Header.Get("Retry-After"); ra != "5" {
						t.Errorf("%s %s: Retry-After %q, want 5", r.tenant, r.call, ra)
					}
				}
				if g := tc.golden[r.tenant+" "+r.call]; g != "" {
					checkGolden(t, g, res, body)
				}
				if r.decision != "" {
					want[r.decision]++
				}
			}
			// One fetch for all the calls: the failure is remembered.
			if n := cb.catalogs.Load(); n != tc.fetches {
				t.Errorf("%d catalog fetches, want %d", n, tc.fetches)
			}
			text := scrape(t, promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
			for _, d := range []string{refused, forwarded} {
				line := fmt.Sprintf(`osb_gateway_catalog_unavailable_total{broker="b1",decision=%q} %d`, d, want[d])
				// A decision never taken shows 0: every series is there from the start.
				if !strings.Contains(text, line+"\n") {
					t.Errorf("metrics lack %s:\n%s", line, grepLines(text, "catalog_unavailable"))
				}
			}
			if n := want[forwarded]; n > 0 && !strings.Contains(text, fmt.Sprintf(`osb_gateway_findings_total{broker="b1",direction="request",rule=%q} %d`, catalog.RuleCatalogUnavailable, n)) {
				t.Errorf("no finding %s for the calls forwarded unchecked:\n%s", catalog.RuleCatalogUnavailable, grepLines(text, "findings"))
			}
		})
	}

	t.Run("requests off, no filter: nothing fetched", func(t *testing.T) {
		cb := newCatalogBroker(t)
		cb.set(`{}`, 500, 0)
		_, gw, _ := unavailableGateway(t, cb, osbtest.NewClock(time.Now()), config.ModeOff, config.WithoutCatalogRefuse, &logCounter{})
		for _, c := range []string{"provision", "provision hidden", "update", "bind", "unbind", "deprovision"} {
			if res, body := osbCall(t, gw, "t1", c); res.StatusCode != 201 {
				t.Errorf("%s: %d %s", c, res.StatusCode, body)
			}
		}
		if n := cb.catalogs.Load(); n != 0 {
			t.Errorf("%d catalog fetches, want none", n)
		}
	})
}

// grepLines returns the lines of text containing s.
func grepLines(text, s string) string {
	var out []string
	for line := range strings.SplitSeq(text, "\n") {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestCatalogFetchBackoff: under a failing broker the gateway fetched the
// catalog and logged a line on every call (3,867 lines in 60s). Now it
// fetches once per retry interval per catalog, doubling while failures
// continue, logs once per fetch, and answers the calls in between at once
// with the remembered failure; an admin refresh fetches regardless.
func TestCatalogFetchBackoff(t *testing.T) {
	cb := newCatalogBroker(t)
	cb.set(`{}`, 500, 0)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &logCounter{prefix: "catalog fetch failed"}
	g, gw, _ := unavailableGateway(t, cb, clock, config.ModeEnforce, config.WithoutCatalogRefuse, logs)
	admin := newAdmin(NewSwitch(g), slog.New(slog.DiscardHandler), nil)
	as := httptest.NewServer(admin)
	t.Cleanup(as.Close)

	// burst sends n catalog reads and provisions from both tenants, some
	// concurrently, and checks that each got a 503 naming the next fetch.
	burst := func(n int, next string) {
		t.Helper()
		var wg sync.WaitGroup
		var bad atomic.Int32
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var res *http.Response
				var body string
				switch i % 3 {
				case 0:
					res, body = getCatalog(t, gw, t1User, t1Pass, nil)
				case 1:
					res, body = osbCall(t, gw, "t1", "provision")
				default:
					res, body = osbCall(t, gw, "t2", "bind")
				}
				if res.StatusCode != 503 || !strings.Contains(body, "status 500") || !strings.Contains(body, "fetches it again at "+next) {
					bad.Add(1)
					t.Logf("%d %s", res.StatusCode, body)
				}
			}()
			if i%10 == 9 {
				wg.Wait() // sequential waves too, not only concurrent misses
			}
		}
		wg.Wait()
		if bad.Load() > 0 {
			t.Errorf("%d of %d calls did not get the remembered failure", bad.Load(), n)
		}
	}
	check := func(step string, fetches, lines int64) {
		t.Helper()
		if n := cb.catalogs.Load(); n != fetches {
			t.Errorf("%s: %d catalog fetches, want %d", step, n, fetches)
		}
		if n := logs.n.Load(); n != lines {
			t.Errorf("%s: %d log lines, want %d", step, n, lines)
		}
	}

	burst(60, "2026-01-01T00:00:05Z")
	check("first interval", 1, 1)
	clock.Advance(4 * time.Second)
	burst(30, "2026-01-01T00:00:05Z")
	check("within the interval", 1, 1)
	clock.Advance(time.Second) // 00:05: the next fetch fails too; the wait doubles
	burst(30, "2026-01-01T00:00:15Z")
	check("second interval", 2, 2)
	clock.Advance(9 * time.Second)
	burst(30, "2026-01-01T00:00:15Z")
	check("within the doubled interval", 2, 2)

	_, body := adminCall(t, "GET", as.URL+"/admin/brokers", testAdminToken)
	var list struct {
		Brokers []adminBrokerRow `json:"brokers"`
	}
	_ = json.Unmarshal([]byte(body), &list)
	if len(list.Brokers) != 1 || list.Brokers[0].NextFetch == nil || !list.Brokers[0].NextFetch.Equal(time.Date(2026, 1, 1, 0, 0, 15, 0, time.UTC)) {
		t.Errorf("GET /admin/brokers does not show the next fetch: %+v", list.Brokers)
	}

	// An admin refresh fetches now, backoff or not.
	if res, _ := adminCall(t, "POST", as.URL+"/admin/brokers/b1/catalog/refresh", testAdminToken); res.StatusCode != http.StatusBadGateway {
		t.Errorf("refresh of a failing broker: %d", res.StatusCode)
	}
	check("admin refresh", 3, 3)

	cb.set(catalogV1, 200, 0)
	if res, body := osbCall(t, gw, "t1", "provision"); res.StatusCode != 503 {
		t.Errorf("the broker recovered within the backoff: %d %s, want the remembered 503", res.StatusCode, body)
	}
	if res, _ := adminCall(t, "POST", as.URL+"/admin/brokers/b1/catalog/refresh", testAdminToken); res.StatusCode != 200 {
		t.Fatalf("refresh of a recovered broker: %d", res.StatusCode)
	}
	for _, c := range []struct{ tenant, call string }{{"t1", "provision"}, {"t2", "provision"}, {"t2", "unbind"}} {
		if res, body := osbCall(t, gw, c.tenant, c.call); res.StatusCode != 201 {
			t.Errorf("%s %s after the refresh: %d %s", c.tenant, c.call, res.StatusCode, body)
		}
	}
	if res, body := osbCall(t, gw, "t2", "provision denied"); res.StatusCode != 400 {
		t.Errorf("denied plan with the catalog: %d %s", res.StatusCode, body)
	}
	check("recovered", 4, 3)
}

// TestCatalogStaleRefreshBacksOff: a stale catalog is served while the
// broker fails, and its background refresh waits for the backoff too.
func TestCatalogStaleRefreshBacksOff(t *testing.T) {
	cb := newCatalogBroker(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	logs := &logCounter{prefix: "catalog fetch failed"}
	g, gw, _ := unavailableGateway(t, cb, clock, config.ModeEnforce, config.WithoutCatalogRefuse, logs)
	if res, _ := getCatalog(t, gw, t1User, t1Pass, nil); res.StatusCode != 200 {
		t.Fatalf("first fetch: %d", res.StatusCode)
	}
	cb.set(`{}`, 500, 0)
	clock.Advance(2 * time.Minute) // past the 1m TTL

	stale := func(n int) {
		t.Helper()
		for range n {
			res, body := getCatalog(t, gw, t1User, t1Pass, nil)
			if res.StatusCode != 200 || body != catalogV1 || res.Header.Get("Warning") == "" {
				t.Fatalf("not served stale: %d %q %s", res.StatusCode, res.Header.Get("Warning"), body)
			}
			if res, body := osbCall(t, gw, "t2", "provision denied"); res.StatusCode != 400 {
				t.Fatalf("filter with a stale catalog: %d %s", res.StatusCode, body)
			}
		}
	}
	// refreshed waits until n refreshes failed and the entry takes another.
	refreshed := func(n int64) {
		t.Helper()
		e, ok := g.catalogs.Entries.Peek(catalog.Key{Broker: "b1", Version: "2.16"})
		if !ok {
			t.Fatal("the stale entry is gone")
		}
		waitFor(t, func() bool { return logs.n.Load() == n && !e.Refreshing.Load() })
	}
	stale(1) // starts one background refresh, which fails
	refreshed(1)
	stale(20)
	if n := cb.catalogs.Load(); n != 2 {
		t.Errorf("%d catalog fetches within the retry interval, want 2", n)
	}
	clock.Advance(config.DefaultCatalogRetryInterval)
	stale(1)
	refreshed(2)
	stale(20)
	if n := cb.catalogs.Load(); n != 3 {
		t.Errorf("%d catalog fetches after one retry interval, want 3", n)
	}
}

func TestCatalogRetryWait(t *testing.T) {
	tests := []struct {
		name  string
		c     config.BrokerCatalog
		waits []time.Duration // after the 1st, 2nd, … consecutive failure
	}{
		{"defaults", config.BrokerCatalog{RetryInterval: config.DefaultCatalogRetryInterval, RetryMaxInterval: config.DefaultCatalogRetryMaxInterval},
			[]time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, time.Minute, time.Minute}},
		{"no growth", config.BrokerCatalog{RetryInterval: 2 * time.Second, RetryMaxInterval: 2 * time.Second},
			[]time.Duration{2 * time.Second, 2 * time.Second, 2 * time.Second}},
		{"cap between doublings", config.BrokerCatalog{RetryInterval: time.Second, RetryMaxInterval: 3 * time.Second},
			[]time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 3 * time.Second}},
		{"zero value", config.BrokerCatalog{}, []time.Duration{5 * time.Second, 10 * time.Second}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []time.Duration
			for i := range tc.waits {
				got = append(got, catalog.RetryWait(tc.c, i+1))
			}
			if diff := cmp.Diff(tc.waits, got); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
	if d := catalog.RetryWait(config.BrokerCatalog{RetryInterval: time.Hour, RetryMaxInterval: 24 * time.Hour}, 1000); d != 24*time.Hour {
		t.Errorf("after 1000 failures: %s, want the cap", d)
	}
}
