package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/proxytest"
)

// A catalog with odd spacing, so re-encoding would show.
const catalogV1 = `{"services":[ {"id":"svc-mysql","name":"mysql","description":"MySQL","bindable":true,
 "plans":[{"id":"p-small","name":"small","description":"s"},{"id":"p-large","name":"large","description":"l"}]},
 {"id":"svc-redis","name":"redis","description":"Redis","bindable":true,"x-extra":{"keep":[1,2]},
 "plans":[{"id":"p-cache","name":"cache","description":"c"}]}]}`

const catalogV2 = `{"services":[{"id":"svc-mysql","name":"mysql","description":"MySQL v2","bindable":true,"plans":[{"id":"p-small","name":"small","description":"s"}]}]}`

// catalogBroker serves a catalog it can change, fail or slow down, and
// counts what reaches it.
type catalogBroker struct {
	*httptest.Server
	mu       sync.Mutex
	body     string
	status   int
	delay    time.Duration
	catalogs atomic.Int64
	others   atomic.Int64
	versions sync.Map
}

func newCatalogBroker(t *testing.T) *catalogBroker {
	cb := &catalogBroker{body: catalogV1, status: 200}
	cb.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v2/catalog" {
			cb.others.Add(1)
			w.WriteHeader(201)
			_, _ = io.WriteString(w, `{}`)
			return
		}
		cb.catalogs.Add(1)
		cb.versions.Store(r.Header.Get("X-Broker-API-Version"), true)
		cb.mu.Lock()
		body, status, delay := cb.body, cb.status, cb.delay
		cb.mu.Unlock()
		time.Sleep(delay)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(cb.Close)
	return cb
}

func (cb *catalogBroker) set(body string, status int, delay time.Duration) {
	cb.mu.Lock()
	cb.body, cb.status, cb.delay = body, status, delay
	cb.mu.Unlock()
}

const catalogYAML = `
admin: {address: "off", token: "` + testAdminToken + `"}
brokers:
  - name: b1
    url: ${B1_URL}
    catalog: {ttl: 1m}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b1}]
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes:
      - broker: b1
        services: {allow: ["mysql", "svc-redi?"]}
        plans: {deny: ["*/large"]}
`

func catalogGateway(t *testing.T, cb *catalogBroker, clock *osbtest.Clock) (*Gateway, *httptest.Server) {
	t.Helper()
	cfg, err := config.Parse([]byte(catalogYAML), config.Options{LookupEnv: func(k string) (string, bool) { return cb.URL, true }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	return g, srv
}

func getCatalog(t *testing.T, gw *httptest.Server, user, pass string, hdr map[string]string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", gw.URL+"/"+user[:2]+"/b1/v2/catalog", nil)
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-Broker-API-Version", "2.16")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	return send(t, req)
}

func TestCatalogServedFaithfullyFromCache(t *testing.T) {
	cb := newCatalogBroker(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, gw := catalogGateway(t, cb, clock)
	for i := 0; i < 5; i++ {
		res, body := getCatalog(t, gw, t1User, t1Pass, nil)
		if res.StatusCode != 200 || body != catalogV1 {
			t.Fatalf("request %d: %d, body differs from the broker's bytes:\n%s", i, res.StatusCode, body)
		}
		if res.Header.Get("ETag") == "" || res.Header.Get("Last-Modified") != "Thu, 01 Jan 2026 00:00:00 GMT" {
			t.Errorf("ETag %q, Last-Modified %q", res.Header.Get("ETag"), res.Header.Get("Last-Modified"))
		}
	}
	if n := cb.catalogs.Load(); n != 1 {
		t.Errorf("broker fetched %d times for 5 requests", n)
	}
	// Another API version is another entry.
	req, _ := http.NewRequest("GET", gw.URL+"/t1/b1/v2/catalog", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.13")
	if res, _ := send(t, req); res.StatusCode != 200 || cb.catalogs.Load() != 2 {
		t.Errorf("second version: %d, %d fetches", res.StatusCode, cb.catalogs.Load())
	}
	if _, ok := cb.versions.Load("2.13"); !ok {
		t.Error("the broker was never asked for 2.13")
	}
}

func TestCatalogTTLAndStaleWhileRevalidate(t *testing.T) {
	cb := newCatalogBroker(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, gw := catalogGateway(t, cb, clock)
	getCatalog(t, gw, t1User, t1Pass, nil)
	clock.Advance(59 * time.Second)
	if _, body := getCatalog(t, gw, t1User, t1Pass, nil); body != catalogV1 || cb.catalogs.Load() != 1 {
		t.Fatalf("within the TTL: %d fetches", cb.catalogs.Load())
	}
	cb.set(catalogV2, 200, 0)
	clock.Advance(2 * time.Second) // past the 1m TTL
	res, body := getCatalog(t, gw, t1User, t1Pass, nil)
	if body != catalogV1 || res.Header.Get("Warning") == "" {
		t.Fatalf("expired entry not served stale with a Warning: %q %s", res.Header.Get("Warning"), body)
	}
	waitFor(t, func() bool { _, b := getCatalog(t, gw, t1User, t1Pass, nil); return b == catalogV2 })
	res, _ = getCatalog(t, gw, t1User, t1Pass, nil)
	if res.Header.Get("Warning") != "" || res.Header.Get("Last-Modified") != "Thu, 01 Jan 2026 00:01:01 GMT" {
		t.Errorf("after the refresh: Warning %q, Last-Modified %q", res.Header.Get("Warning"), res.Header.Get("Last-Modified"))
	}
	if n := cb.catalogs.Load(); n != 2 {
		t.Errorf("%d fetches, want 2 (one background refresh)", n)
	}
}

func TestCatalogSingleflight(t *testing.T) {
	cb := newCatalogBroker(t)
	cb.set(catalogV1, 200, 200*time.Millisecond)
	_, gw := catalogGateway(t, cb, osbtest.NewClock(time.Now()))
	var wg sync.WaitGroup
	var bad atomic.Int32
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, body := getCatalog(t, gw, t1User, t1Pass, nil)
			if res.StatusCode != 200 || body != catalogV1 {
				bad.Add(1)
			}
		}()
	}
	wg.Wait()
	if bad.Load() != 0 {
		t.Errorf("%d requests failed", bad.Load())
	}
	if n := cb.catalogs.Load(); n != 1 {
		t.Errorf("100 concurrent misses made %d broker fetches, want 1", n)
	}
}

func TestCatalogBrokerDown(t *testing.T) {
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t.Run("no good catalog ever", func(t *testing.T) {
		cb := newCatalogBroker(t)
		cb.set(`{"services": "nope"`, 200, 0)
		_, gw := catalogGateway(t, cb, clock)
		res, body := getCatalog(t, gw, t1User, t1Pass, nil)
		if res.StatusCode != 503 || !strings.Contains(body, `broker \"b1\"`) || !strings.Contains(body, "not valid") {
			t.Errorf("%d %s", res.StatusCode, body)
		}
		cb.set(`{}`, 500, 0)
		clock.Advance(config.DefaultCatalogRetryInterval) // the failure is remembered until then
		res, body = getCatalog(t, gw, t1User, t1Pass, nil)
		if res.StatusCode != 503 || !strings.Contains(body, "status 500") {
			t.Errorf("%d %s", res.StatusCode, body)
		}
	})
	t.Run("last good catalog served", func(t *testing.T) {
		cb := newCatalogBroker(t)
		_, gw := catalogGateway(t, cb, clock)
		getCatalog(t, gw, t1User, t1Pass, nil)
		cb.Close() // the broker goes away
		clock.Advance(2 * time.Minute)
		for i := 0; i < 3; i++ {
			res, body := getCatalog(t, gw, t1User, t1Pass, nil)
			if res.StatusCode != 200 || body != catalogV1 || !strings.Contains(res.Header.Get("Warning"), "Stale") {
				t.Fatalf("%d %q %s", res.StatusCode, res.Header.Get("Warning"), body)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

func TestCatalogConditionalGET(t *testing.T) {
	cb := newCatalogBroker(t)
	_, gw := catalogGateway(t, cb, osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	res, _ := getCatalog(t, gw, t1User, t1Pass, nil)
	etag, lm := res.Header.Get("ETag"), res.Header.Get("Last-Modified")
	tests := []struct {
		name string
		hdr  map[string]string
		want int
	}{
		{"matching If-None-Match", map[string]string{"If-None-Match": etag}, 304},
		{"listed among others", map[string]string{"If-None-Match": `"x", W/` + etag}, 304},
		{"star", map[string]string{"If-None-Match": "*"}, 304},
		{"other etag", map[string]string{"If-None-Match": `"other"`}, 200},
		{"If-Modified-Since equal", map[string]string{"If-Modified-Since": lm}, 304},
		{"If-Modified-Since later", map[string]string{"If-Modified-Since": "Fri, 02 Jan 2026 00:00:00 GMT"}, 304},
		{"If-Modified-Since earlier", map[string]string{"If-Modified-Since": "Wed, 31 Dec 2025 00:00:00 GMT"}, 200},
		{"If-None-Match wins", map[string]string{"If-None-Match": `"other"`, "If-Modified-Since": lm}, 200},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, body := getCatalog(t, gw, t1User, t1Pass, tc.hdr)
			if res.StatusCode != tc.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tc.want)
			}
			if tc.want == 304 && (body != "" || res.Header.Get("ETag") != etag) {
				t.Errorf("304 with body %q, ETag %q", body, res.Header.Get("ETag"))
			}
		})
	}
}

func TestCatalogTenantViews(t *testing.T) {
	cb := newCatalogBroker(t)
	_, gw := catalogGateway(t, cb, osbtest.NewClock(time.Now()))
	_, full := getCatalog(t, gw, t1User, t1Pass, nil)
	res, filtered := getCatalog(t, gw, t2User, t2Pass, nil)
	if res.StatusCode != 200 || full != catalogV1 {
		t.Fatalf("unfiltered: %s", full)
	}
	// The broker's bytes but for the plan t2 may not see.
	if want := strings.Replace(catalogV1, `,{"id":"p-large","name":"large","description":"l"}`, "", 1); filtered != want {
		t.Errorf("tenant t2's view is not the broker's bytes without p-large:\n got %s\nwant %s", filtered, want)
	}
	var cat struct {
		Services []struct {
			ID    string                `json:"id"`
			Extra json.RawMessage       `json:"x-extra"`
			Plans []struct{ ID string } `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal([]byte(filtered), &cat); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range cat.Services {
		for _, p := range s.Plans {
			got = append(got, s.ID+"/"+p.ID)
		}
	}
	if strings.Join(got, ",") != "svc-mysql/p-small,svc-redis/p-cache" {
		t.Errorf("tenant t2 sees %v", got)
	}
	if string(cat.Services[1].Extra) != `{"keep":[1,2]}` {
		t.Errorf("unknown fields not kept: %s", cat.Services[1].Extra)
	}
	if res.Header.Get("ETag") == "" || cb.catalogs.Load() != 1 {
		t.Errorf("filtered view: ETag %q, %d fetches", res.Header.Get("ETag"), cb.catalogs.Load())
	}

	for _, tc := range []struct {
		name, user, pass, body string
		status                 int
	}{
		{"hidden plan", t2User, t2Pass, `{"service_id":"svc-mysql","plan_id":"p-large","organization_guid":"o","space_guid":"s"}`, 400},
		{"visible plan", t2User, t2Pass, `{"service_id":"svc-mysql","plan_id":"p-small","organization_guid":"o","space_guid":"s"}`, 201},
		// A Go broker reads the last key in any case: the hidden plan.
		{"hidden plan behind a duplicate key", t2User, t2Pass, `{"service_id":"svc-mysql","plan_id":"p-small","PLAN_ID":"p-large","organization_guid":"o","space_guid":"s"}`, 400},
		{"same plan for the unfiltered tenant", t1User, t1Pass, `{"service_id":"svc-mysql","plan_id":"p-large","organization_guid":"o","space_guid":"s"}`, 201},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := cb.others.Load()
			id := "i1"
			if tc.user == t1User {
				id = "i1-t1" // i1 is t2's: an instance belongs to the tenant that made it
			}
			req, _ := http.NewRequest("PUT", gw.URL+"/"+tc.user[:2]+"/b1/v2/service_instances/"+id, strings.NewReader(tc.body))
			req.SetBasicAuth(tc.user, tc.pass)
			req.Header.Set("X-Broker-API-Version", "2.16")
			res, body := send(t, req)
			if res.StatusCode != tc.status {
				t.Fatalf("%d %s", res.StatusCode, body)
			}
			if reached := cb.others.Load() > before; reached != (tc.status == 201) {
				t.Errorf("broker reached = %v", reached)
			}
			if tc.name == "hidden plan" {
				checkGolden(t, "catalog_hidden_plan", res, body)
			}
		})
	}
}

func TestCatalogAdminAndReload(t *testing.T) {
	cb := newCatalogBroker(t)
	clock := osbtest.NewClock(time.Now())
	g, gw := catalogGateway(t, cb, clock)
	sw := NewSwitch(g)
	admin := newAdmin(sw, slog.New(slog.DiscardHandler), nil)
	as := httptest.NewServer(admin)
	defer as.Close()
	getCatalog(t, gw, t1User, t1Pass, nil)
	getCatalog(t, gw, t1User, t1Pass, nil)

	cb.set(catalogV2, 200, 0)
	if res, body := adminCall(t, "POST", as.URL+"/admin/brokers/b1/catalog/refresh", testAdminToken); res.StatusCode != 200 {
		t.Fatalf("refresh: %v %s", res.Status, body)
	}
	if _, body := getCatalog(t, gw, t1User, t1Pass, nil); body != catalogV2 {
		t.Errorf("after refresh: %s", body)
	}
	_, body := adminCall(t, "GET", as.URL+"/admin/brokers", testAdminToken)
	var list struct {
		Brokers []adminBrokerRow `json:"brokers"`
	}
	_ = json.Unmarshal([]byte(body), &list)
	if len(list.Brokers) != 1 || list.Brokers[0].Hits != 2 || list.Brokers[0].Misses != 1 || len(list.Brokers[0].Catalogs) != 1 ||
		list.Brokers[0].Catalogs[0].Bytes != len(catalogV2) {
		t.Errorf("GET /admin/brokers: %+v", list)
	}
	if res, _ := adminCall(t, "POST", as.URL+"/admin/brokers/nope/catalog/refresh", testAdminToken); res.StatusCode != 404 {
		t.Errorf("unknown broker: %d", res.StatusCode)
	}

	// A reload with unchanged broker settings keeps the entry; a changed
	// one drops it.
	cfg := *g.Config()
	g2, err := New(&cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Previous: g})
	if err != nil {
		t.Fatal(err)
	}
	if g2.Catalogs() != g.Catalogs() || g2.Catalogs().Entries.Len() != 1 {
		t.Errorf("unchanged reload lost the cache")
	}
	cfg2 := cfg
	cfg2.Brokers = append([]config.Broker(nil), cfg.Brokers...)
	cfg2.Brokers[0].Catalog.TTL = 2 * time.Minute
	if _, err := New(&cfg2, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Previous: g2}); err != nil {
		t.Fatal(err)
	}
	if n := g.Catalogs().Entries.Len(); n != 0 {
		t.Errorf("changed broker settings kept %d entries", n)
	}
	if err := g.WarmCatalogs(context.Background()); err != nil || g.CatalogsReady() != nil {
		t.Errorf("warm: %v, ready: %v", err, g.CatalogsReady())
	}
}

var waitFor = proxytest.WaitFor
