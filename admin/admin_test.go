package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

const testAdminToken = "a-long-enough-admin-token"

// adminRoutes are the control routes New mounts; a new route joins this
// list, the admin API section of docs/operating.md and pathValues.
var adminRoutes = []string{
	"GET /admin/brokers",
	"POST /admin/brokers/{broker}/catalog/refresh",
	"GET /admin/catalogs/drift",
	"POST /admin/catalogs/{broker}/accept",
	"GET /admin/operations",
	"DELETE /admin/operations/{broker}/{instance}",
	"DELETE /admin/operations/{broker}/{instance}/{binding}",
	"POST /admin/operations/{broker}/{instance}/reconcile",
	"POST /admin/operations/{broker}/{instance}/{binding}/reconcile",
	"GET /admin/orphans",
	"POST /admin/orphans/{orphan}/retry",
	"GET /admin/instances",
	"GET /admin/instances/{broker}/{instance}",
	"GET /admin/bindings/expiring",
	"GET /admin/usage",
	"GET /admin/usage/series",
	"POST /admin/reload",
	"GET /admin/debug/pprof/",
}

// pathValues fill the wildcards of adminRoutes when a test calls them.
var pathValues = strings.NewReplacer("{broker}", "b", "{instance}", "i1", "{orphan}", "o1")

// adminUnderTest is an admin handler and the gateway it views.
type adminUnderTest struct {
	*Admin
	gw *proxy.Gateway
}

// adminEnv is an admin handler mounted as serve mounts it, over a gateway
// with one sample broker "b", admin.token set to token (none when empty)
// and the state store st (memory when nil). It returns the admin's URL and
// its log.
func adminEnv(t *testing.T, token string, st store.Store) (*adminUnderTest, string, *osbtest.Buffer) {
	t.Helper()
	return adminEnvAt(t, token, st, nil)
}

// adminEnvAt is adminEnv with the gateway's clock now (nil: time.Now).
func adminEnvAt(t *testing.T, token string, st store.Store, now func() time.Time) (*adminUnderTest, string, *osbtest.Buffer) {
	t.Helper()
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: -1})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	yaml := `
admin: {address: "off", token: "` + token + `"}
state: {backend: memory}
brokers: [{name: b, url: "` + bs.URL + `", username: sample, password: sample-secret}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if st == nil {
		st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	logs := &osbtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, nil))
	a := New(proxy.NewView(proxy.NewSwitch(g)), Options{Log: log, Reload: func(context.Context) (Reloaded, error) {
		return Reloaded{Result: proxy.ReloadSuccess, ConfigHash: "0123456789ab", Tenants: 1, Brokers: 1}, nil
	}})
	a.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "up 1\n") }))
	srv := httptest.NewServer(a)
	t.Cleanup(srv.Close)
	return &adminUnderTest{Admin: a, gw: g}, srv.URL, logs
}

// adminCall sends method url with "Authorization: Bearer token" (none when
// token is empty) and returns the answer and its body.
func adminCall(t *testing.T, method, url, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return send(t, req)
}

func TestAdmin(t *testing.T) {
	var ready atomic.Bool
	a := New(nil, Options{Ready: func() error {
		if !ready.Load() {
			return errors.New("draining")
		}
		return nil
	}})
	srv := httptest.NewServer(a)
	defer srv.Close()
	get := func(path string) (int, string) {
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := get("/healthz"); code != 200 || body != "{\"status\":\"ok\"}\n" {
		t.Errorf("/healthz: %d %s", code, body)
	}
	if code, body := get("/readyz"); code != 503 || body != "{\"description\":\"not ready: draining\"}\n" {
		t.Errorf("/readyz while not ready: %d %s", code, body)
	}
	ready.Store(true)
	if code, body := get("/readyz"); code != 200 || body != "{\"status\":\"ready\"}\n" {
		t.Errorf("/readyz when ready: %d %s", code, body)
	}
	if code, _ := get("/t1/b1/v2/catalog"); code != 404 {
		t.Errorf("the admin listener serves OSB paths: %d", code)
	}
	if code, body := get("/admin/brokers"); code != 403 || !strings.Contains(body, "admin.token is not set") {
		t.Errorf("/admin/ with nothing mounted: %d %s", code, body)
	}
}

// TestAdminRoutesNeedTheToken is the regression test for "half of the
// admin API is open": GET /admin/brokers and POST
// /admin/brokers/{broker}/catalog/refresh answered without a token. It
// walks every route the Mount methods registered, and a path no route
// serves: all answer 401 without the token or with a wrong one, and
// something else with the right one; /healthz, /readyz and /metrics stay
// open. (The clock moves a minute per route, so that the wrong tokens stay
// under the limit of refusals per address: TestAdminTokenGuessesAreLimited.)
func TestAdminRoutesNeedTheToken(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a, url, logs := adminEnvAt(t, testAdminToken, nil, clk.Now)
	if diff := cmp.Diff(adminRoutes, a.routes); diff != "" {
		t.Fatalf("registered routes (-listed +registered); list a new route in adminRoutes and docs/operating.md:\n%s", diff)
	}
	for _, pattern := range append(a.routes, "GET /admin/no-such-route") {
		method, path, _ := strings.Cut(pattern, " ")
		path = pathValues.Replace(path)
		clk.Advance(tokenlimit.Window)
		t.Run(pattern, func(t *testing.T) {
			for _, tc := range []struct{ name, header string }{
				{"no token", ""},
				{"wrong token", "Bearer wrong-token-of-some-length"},
				{"token as prefix", "Bearer " + testAdminToken + "x"},
				{"basic auth", "Basic dDEtdXNlcjp0MS1wYXNz"},
			} {
				req, _ := http.NewRequest(method, url+path, nil)
				if tc.header != "" {
					req.Header.Set("Authorization", tc.header)
				}
				res, body := send(t, req)
				if res.StatusCode != 401 || res.Header.Get("Www-Authenticate") == "" || res.Header.Get("Content-Type") != "application/json" {
					t.Errorf("%s: %d %v %s", tc.name, res.StatusCode, res.Header, body)
				}
			}
			if res, body := adminCall(t, method, url+path, testAdminToken); res.StatusCode == 401 || res.StatusCode == 403 {
				t.Errorf("with the token: %d %s", res.StatusCode, body)
			}
		})
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if res, body := adminCall(t, "GET", url+path, ""); res.StatusCode != 200 {
			t.Errorf("%s without a token: %d %s", path, res.StatusCode, body)
		}
	}
	if strings.Contains(logs.String(), testAdminToken) {
		t.Error("the token is in the log")
	}
}

// TestAdminRefusals pins the error bodies: one JSON shape, the
// description says what was expected and what came.
func TestAdminRefusals(t *testing.T) {
	_, url, _ := adminEnv(t, testAdminToken, nil)
	_, closed, _ := adminEnv(t, "", nil)
	for _, tc := range []struct {
		name, base, method, path, header string
	}{
		{"admin_no_token_set", closed, "GET", "/admin/brokers", "Bearer " + testAdminToken},
		{"admin_token_missing", url, "POST", "/admin/brokers/b/catalog/refresh", ""},
		{"admin_token_wrong", url, "GET", "/admin/brokers", "Bearer wrong-token-of-some-length"},
		{"admin_token_scheme", url, "GET", "/admin/operations", "Basic dDEtdXNlcjp0MS1wYXNz"},
		{"admin_no_route", url, "PUT", "/admin/brokers", "Bearer " + testAdminToken},
		{"admin_release_no_reason", url, "DELETE", "/admin/operations/b/i1", "Bearer " + testAdminToken},
		{"admin_no_operation", url, "DELETE", "/admin/operations/b/i1?reason=stuck", "Bearer " + testAdminToken},
		{"admin_no_broker", url, "POST", "/admin/brokers/nope/catalog/refresh", "Bearer " + testAdminToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, tc.base+tc.path, nil)
			if tc.header != "" {
				req.Header.Set("Authorization", tc.header)
			}
			res, body := send(t, req)
			checkGolden(t, tc.name, res, body)
		})
	}
}

// TestAdminWithoutTokenIsClosed: without admin.token every /admin/ route
// answers 403, whatever the request carries.
func TestAdminWithoutTokenIsClosed(t *testing.T) {
	a, url, _ := adminEnv(t, "", nil)
	for _, pattern := range a.routes {
		method, path, _ := strings.Cut(pattern, " ")
		for _, token := range []string{"", testAdminToken} {
			if res, body := adminCall(t, method, url+pathValues.Replace(path), token); res.StatusCode != 403 ||
				!strings.Contains(body, "admin.token is not set") {
				t.Errorf("%s with token %q: %d %s", pattern, token, res.StatusCode, body)
			}
		}
	}
}

// failingStore is a state store that cannot be reached.
type failingStore struct{ store.Store }

var errStoreDown = errors.New("dial tcp 10.9.8.7:6379: connect: connection refused")

func (failingStore) List(context.Context, store.ListFilter) ([]store.Lock, error) {
	return nil, errStoreDown
}
func (failingStore) ForceRelease(context.Context, string) (store.Lock, error) {
	return store.Lock{}, errStoreDown
}
func (failingStore) ListOrphans(context.Context) ([]store.Orphan, error) { return nil, errStoreDown }
func (failingStore) GetOrphan(context.Context, string) (store.Orphan, error) {
	return store.Orphan{}, errStoreDown
}
func (failingStore) ListInstances(context.Context, store.InstanceFilter, string, int) ([]store.Instance, string, error) {
	return nil, "", errStoreDown
}
func (failingStore) GetInstance(context.Context, string, string) (store.Instance, error) {
	return store.Instance{}, errStoreDown
}
func (failingStore) ExpiringBindings(context.Context, string, time.Time, int) ([]store.Binding, error) {
	return nil, errStoreDown
}

// TestAdminStoreErrorsStayInTheLog: when the state store fails, the
// answer is 503 saying what failed in words; the store's error text is in
// the log only.
func TestAdminStoreErrorsStayInTheLog(t *testing.T) {
	mem, _ := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	_, url, logs := adminEnv(t, testAdminToken, failingStore{mem})
	for _, tc := range []struct{ method, path, golden string }{
		{"GET", "/admin/operations", "admin_store_list_operations"},
		{"DELETE", "/admin/operations/b/i1?reason=stuck", "admin_store_release"},
		{"GET", "/admin/orphans", "admin_store_list_orphans"},
		{"POST", "/admin/orphans/o1/retry", "admin_store_retry"},
		{"GET", "/admin/instances", "admin_store_list_instances"},
		{"GET", "/admin/instances/b/i1", "admin_store_get_instance"},
		{"GET", "/admin/bindings/expiring", "admin_store_list_expiring"},
	} {
		res, body := adminCall(t, tc.method, url+tc.path, testAdminToken)
		if strings.Contains(body, "10.9.8.7") {
			t.Errorf("%s %s: the store's error is in the answer: %s", tc.method, tc.path, body)
		}
		checkGolden(t, tc.golden, res, body)
	}
	if n := strings.Count(logs.String(), errStoreDown.Error()); n != 7 {
		t.Errorf("the store's error is logged %d times, want 7:\n%s", n, logs)
	}
}

// TestAdminLogsEveryCall: each call leaves one line naming the method,
// route, path values, who and the outcome; reads at info, changes and
// refusals at warn; never the token.
func TestAdminLogsEveryCall(t *testing.T) {
	_, url, logs := adminEnv(t, testAdminToken, nil)
	adminCall(t, "GET", url+"/admin/brokers", testAdminToken)
	adminCall(t, "POST", url+"/admin/brokers/b/catalog/refresh", "")
	req, _ := http.NewRequest("DELETE", url+"/admin/operations/b/i1?reason=stuck", nil)
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("X-Operator", "alice")
	send(t, req)

	type line struct {
		Level, Msg, Method, Route, Broker, Instance, Outcome string
		Status                                               int
		Who                                                  string
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		v.Who, _, _ = strings.Cut(v.Who, " from ")
		if strings.HasPrefix(v.Who, "127.0.0.1:") {
			v.Who = "127.0.0.1"
		}
		got = append(got, v)
	}
	want := []line{
		{Level: "INFO", Msg: "admin call", Method: "GET", Route: "GET /admin/brokers", Status: 200, Who: "127.0.0.1",
			Outcome: "listed 1 brokers"},
		{Level: "WARN", Msg: "admin call", Method: "POST", Route: "POST /admin/brokers/{broker}/catalog/refresh", Broker: "b",
			Status: 401, Who: "127.0.0.1",
			Outcome: "a bearer token is required: expected Authorization: Bearer <admin.token>, got no Authorization header"},
		{Level: "WARN", Msg: "admin call", Method: "DELETE", Route: "DELETE /admin/operations/{broker}/{instance}", Broker: "b",
			Instance: "i1", Status: 404, Who: "alice",
			Outcome: `no operation in progress on instance "i1" of broker "b"`},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
	if strings.Contains(logs.String(), testAdminToken) {
		t.Error("the token is in the log")
	}
}

// TestAdminDocsListEveryRoute: the admin API section of docs/operating.md
// names every control route.
func TestAdminDocsListEveryRoute(t *testing.T) {
	readme, err := os.ReadFile("../docs/operating.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, pattern := range adminRoutes {
		if !bytes.Contains(readme, []byte("`"+pattern+"`")) {
			t.Errorf("docs/operating.md does not list `%s`", pattern)
		}
	}
}

// TestAdminHandleRefusesControlRoutes: Handle cannot add a route under
// /admin/, which would skip the token.
func TestAdminHandleRefusesControlRoutes(t *testing.T) {
	for _, pattern := range []string{"GET /admin/x", "/admin/", "localhost/admin/x", "POST /admin"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", pattern)
				}
			}()
			New(nil, Options{}).Handle(pattern, http.NotFoundHandler())
		}()
	}
}
