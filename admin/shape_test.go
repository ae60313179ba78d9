package admin

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// snakeKey is the one style of JSON field names in admin answers.
var snakeKey = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// jsonKeys returns every object key in v, at any depth, with its path.
func jsonKeys(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			out[path+"."+k] = k
			jsonKeys(e, path+"."+k, out)
		}
	case []any:
		for _, e := range x {
			jsonKeys(e, path+"[]", out)
		}
	}
}

// TestAdminAnswersAreSnakeCase: every field of every admin answer is in
// snake_case (GET /admin/operations showed store.Lock's Go names, InstanceID
// beside age_seconds).
func TestAdminAnswersAreSnakeCase(t *testing.T) {
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	ctx := t.Context()
	now := time.Now()
	if _, err := st.Acquire(ctx, store.Lock{Key: store.LockKey("b", "i1"), Owner: "o", Kind: store.KindProvision, Tenant: "t1",
		Broker: "b", InstanceID: "i1", Async: true, Operation: "op", Deadline: now.Add(time.Hour),
		Shim: store.Shim{State: "in progress", CallEnds: now.Add(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutOrphan(ctx, store.Orphan{ID: "o1", Broker: "b", Tenant: "t1", Kind: store.KindDeprovision, InstanceID: "i9",
		Reason: "test", ClaimedBy: "x", ClaimedUntil: now.Add(-time.Minute), NextAttempt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutInstance(ctx, store.Instance{Broker: "b", InstanceID: "i1", Tenant: "t1"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutBinding(ctx, store.Binding{Broker: "b", InstanceID: "i1", BindingID: "b1", ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	_, url, _ := adminEnv(t, testAdminToken, st)
	for _, c := range []struct{ method, path string }{
		{"GET", "/admin/operations"},
		{"GET", "/admin/orphans"},
		{"GET", "/admin/brokers"},
		{"GET", "/admin/instances"},
		{"GET", "/admin/instances/b/i1"},
		{"GET", "/admin/bindings/expiring"},
		{"POST", "/admin/brokers/b/catalog/refresh"},
		{"GET", "/admin/catalogs/drift"},
		{"POST", "/admin/catalogs/b/accept"},
		{"DELETE", "/admin/operations/b/i1?reason=test"},
		{"GET", "/admin/nothing"},
		{"GET", "/healthz"},
		{"GET", "/readyz"},
	} {
		res, body := adminCall(t, c.method, url+c.path, testAdminToken)
		var v any
		if err := json.Unmarshal([]byte(body), &v); err != nil {
			t.Errorf("%s %s: %d, not JSON: %v: %s", c.method, c.path, res.StatusCode, err, body)
			continue
		}
		keys := map[string]string{}
		jsonKeys(v, "", keys)
		if len(keys) == 0 {
			t.Errorf("%s %s: no fields: %s", c.method, c.path, body)
		}
		for path, k := range keys {
			if !snakeKey.MatchString(k) {
				t.Errorf("%s %s: field %s is not snake_case", c.method, c.path, path)
			}
		}
		if c.path == "/admin/operations" && !strings.Contains(body, `"instance_id":"i1"`) {
			t.Errorf("%s: %s", c.path, body)
		}
	}
}

// TestAdminErrorsAreOSBErrors: every refusal of the admin listener, an
// unknown path and a readiness failure included, is one JSON shape, the
// OSB error's, with the description naming what was expected.
func TestAdminErrorsAreOSBErrors(t *testing.T) {
	a := New(nil, Options{Ready: func() error { return errors.New("draining") }})
	a.Handle("GET /metrics", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv := httptest.NewServer(a)
	defer srv.Close()
	for _, tc := range []struct {
		name, method, path string
		status             int
		allow, desc        string
	}{
		{"unknown path", "GET", "/nothing", 404, "",
			"no admin route for GET /nothing: expected one of GET /healthz, GET /readyz, GET /metrics, or a route under /admin/ (see the admin API section of docs/operating.md)"},
		{"wrong method", "POST", "/metrics", 405, "GET", "method POST is not allowed at /metrics; the allowed methods are GET"},
		{"not ready", "GET", "/readyz", 503, "", "not ready: draining"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, nil)
			res, body := send(t, req)
			var got map[string]string
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if res.StatusCode != tc.status || res.Header.Get("Content-Type") != "application/json" || res.Header.Get("Allow") != tc.allow {
				t.Errorf("%d %q Allow %q", res.StatusCode, res.Header.Get("Content-Type"), res.Header.Get("Allow"))
			}
			if diff := cmp.Diff(map[string]string{"description": tc.desc}, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdminAccessLog: each call to the admin listener leaves one access
// line (listener=admin), probes at debug, control calls and refusals at
// info; never the token.
func TestAdminAccessLog(t *testing.T) {
	a, url, _ := adminEnv(t, testAdminToken, nil)
	var buf osbtest.Buffer
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a.LogAccess(proxy.NewAccessLog(&buf, "json", slog.LevelDebug), clock.Now)
	adminCall(t, "GET", url+"/healthz", "")
	adminCall(t, "GET", url+"/admin/brokers", testAdminToken)
	adminCall(t, "GET", url+"/admin/operations", "wrong-token")
	adminCall(t, "GET", url+"/nothing", "")

	type line struct {
		Level, Msg, Listener, Method, Path string
		Status                             int
	}
	var got []line
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var v line
		if err := json.Unmarshal([]byte(l), &v); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		if !strings.Contains(l, `"client":"127.0.0.1:`) || !strings.Contains(l, `"duration_us":`) {
			t.Errorf("no client or duration: %s", l)
		}
		got = append(got, v)
	}
	want := []line{
		{"DEBUG", "request", "admin", "GET", "/healthz", 200},
		{"INFO", "request", "admin", "GET", "/admin/brokers", 200},
		{"INFO", "request", "admin", "GET", "/admin/operations", 401},
		{"INFO", "request", "admin", "GET", "/nothing", 404},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access lines (-want +got):\n%s", diff)
	}
	if strings.Contains(buf.String(), testAdminToken) || strings.Contains(buf.String(), "wrong-token") {
		t.Error("a token is in the access log")
	}
}
