package proxy

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
)

// The ids the sample broker's catalog shows through a route with
// ids: {namespace: cf-one} and one with the UUID namespace idsNSTwo: fixed
// test vectors (UUIDv5, checked against Python's uuid.uuid5), so that a
// change of the derivation, which would change every registration's ids,
// fails here.
const (
	idsNSTwo        = "0b5c2d0e-3f4a-4b6c-8d9e-1f2a3b4c5d6e"
	oneServiceID    = "d86e1b24-fc44-5b05-af92-3527abf26d78"
	onePlanSyncID   = "cdf806f4-345b-5ba2-baf1-0d63b2c9ecc6"
	onePlanAsyncID  = "3a0c345c-01b2-521d-848b-9e14ac3b5918"
	twoServiceID    = "72f62655-d067-58d6-b999-96adb0032a68"
	twoPlanSyncID   = "d4eeed7c-cd07-56aa-9b75-827d191695a5"
	twoPlanAsyncID  = "71ca614f-5159-5b35-af97-f3332eefee4e"
	idsRoutesYAML   = `[{broker: b, prefix: /one, ids: {namespace: cf-one}}, {broker: b, prefix: /two, ids: {namespace: "` + idsNSTwo + `"}}, {broker: b, prefix: /raw}]`
	idsBrokerSecret = "sample-secret"
)

// brokerRequest is one request the sample broker got, as it got it.
type brokerRequest struct {
	method, path, query, body string
}

// recordingBroker records every request before the sample broker serves it.
type recordingBroker struct {
	h  http.Handler
	mu sync.Mutex
	rs []brokerRequest
}

func (b *recordingBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.mu.Lock()
	b.rs = append(b.rs, brokerRequest{r.Method, r.URL.Path, r.URL.RawQuery, string(body)})
	b.mu.Unlock()
	b.h.ServeHTTP(w, r)
}

func (b *recordingBroker) requests() []brokerRequest {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]brokerRequest(nil), b.rs...)
}

// idsEnv is the sample broker behind a gateway whose tenant t1 reaches it
// through three routes: /one and /two with ids of their own, /raw with the
// broker's; tenant t2 through /filtered, in /one's namespace, without the
// async plan.
type idsEnv struct {
	sw     *Switch
	gw     *httptest.Server
	broker *recordingBroker
	sample *samplebroker.Broker
	clock  *osbtest.Clock
	st     store.Store
	yaml   func(routes string) string
}

func newIDsEnv(t *testing.T, opts samplebroker.Options, brokerYAML string) *idsEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	opts.Username, opts.Password, opts.Now, opts.AsyncDelay = "sample", idsBrokerSecret, clock.Now, time.Minute
	sample := samplebroker.New(opts)
	rec := &recordingBroker{h: sample}
	bs := httptest.NewServer(rec)
	t.Cleanup(bs.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "inventory.keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &idsEnv{broker: rec, sample: sample, clock: clock}
	e.yaml = func(routes string) string {
		return `
admin: {address: "off"}
inventory: {key_file: ` + keyFile + `}
brokers:
  - name: b
    url: ` + bs.URL + `
    username: sample
    password: ` + idsBrokerSecret + `
    api_version: {max: "2.17"}
` + brokerYAML + `
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: ` + routes + `
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes: [{broker: b, prefix: /filtered, ids: {namespace: cf-one}, plans: {deny: ["*/async"]}}]
`
	}
	e.st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	e.sw = NewSwitch(e.build(t, idsRoutesYAML, nil))
	t.Cleanup(func() { e.sw.Load().Close(nil) })
	e.gw = httptest.NewServer(e.sw)
	t.Cleanup(e.gw.Close)
	return e
}

// build is a gateway for routes, replacing prev (nil: a fresh start, with
// a catalog cache of its own).
func (e *idsEnv) build(t *testing.T, routes string, prev *Gateway) *Gateway {
	t.Helper()
	cfg, err := config.Parse([]byte(e.yaml(routes)), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: e.clock.Now, Store: e.st, Previous: prev})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// reload swaps in a gateway for routes, as a reload does.
func (e *idsEnv) reload(t *testing.T, routes string) {
	t.Helper()
	old := e.sw.Store(e.build(t, routes, e.sw.Load()))
	old.Close(e.sw.Load())
}

// call sends a request through the route at prefix, as OSB 2.17.
func (e *idsEnv) call(t *testing.T, prefix, method, path, body string) (*http.Response, string) {
	t.Helper()
	var in io.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	user, pass := t1User, t1Pass
	if prefix == "/filtered" {
		user, pass = t2User, t2Pass
	}
	return do(t, method, e.gw.URL+prefix+path, user, pass, "2.17", in)
}

// catalogIDs is what a catalog answer names: each service's id, plan ids
// and dashboard client id.
func catalogIDs(t *testing.T, body string) (services, plans []string) {
	t.Helper()
	var cat osb.Catalog
	if err := json.Unmarshal([]byte(body), &cat); err != nil {
		t.Fatalf("catalog: %v: %s", err, body)
	}
	for _, s := range cat.Services {
		services = append(services, s.ID)
		for _, p := range s.Plans {
			plans = append(plans, p.ID)
		}
	}
	return services, plans
}

// TestRouteIDsCatalog: one broker through two routes with namespaces of
// their own shows disjoint derived ids, the fixed test vectors, with
// ETags of their own; the same after a reload and after a restart; a
// route without ids shows the broker's ids and bytes. A reload that
// changes a namespace shows the new ids on the next request.
func TestRouteIDsCatalog(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	type seen struct {
		etag            string
		services, plans []string
		body            string
	}
	look := func(prefix string) seen {
		t.Helper()
		res, body := e.call(t, prefix, "GET", "/v2/catalog", "")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s catalog: %d %s", prefix, res.StatusCode, body)
		}
		s, p := catalogIDs(t, body)
		return seen{etag: res.Header.Get("Etag"), services: s, plans: p, body: body}
	}
	one, two, raw := look("/one"), look("/two"), look("/raw")
	if raw.body != string(e.sample.Catalog()) {
		t.Errorf("the route without ids changed the broker's catalog bytes")
	}
	has := func(ids []string, id string) bool {
		for _, x := range ids {
			if x == id {
				return true
			}
		}
		return false
	}
	for _, c := range []struct {
		name       string
		got        seen
		svc, plans []string
	}{
		{"/one", one, []string{oneServiceID}, []string{onePlanSyncID, onePlanAsyncID}},
		{"/two", two, []string{twoServiceID}, []string{twoPlanSyncID, twoPlanAsyncID}},
		{"/raw", raw, []string{samplebroker.ServiceID}, []string{samplebroker.PlanSyncID, samplebroker.PlanAsyncID}},
	} {
		for _, id := range c.svc {
			if !has(c.got.services, id) {
				t.Errorf("%s: services %q, want %s among them", c.name, c.got.services, id)
			}
		}
		for _, id := range c.plans {
			if !has(c.got.plans, id) {
				t.Errorf("%s: plans %q, want %s among them", c.name, c.got.plans, id)
			}
		}
	}
	all := map[string]string{}
	for name, s := range map[string]seen{"/one": one, "/two": two, "/raw": raw} {
		for _, id := range append(append([]string(nil), s.services...), s.plans...) {
			if other, dup := all[id]; dup {
				t.Errorf("id %s shown by %s and %s: want disjoint ids", id, other, name)
			}
			all[id] = name
		}
	}
	if one.etag == two.etag || one.etag == raw.etag || two.etag == raw.etag || one.etag == "" {
		t.Errorf("ETags %q %q %q: want one per route", one.etag, two.etag, raw.etag)
	}
	// The ETag is that of the bytes served: a revalidation gets 304.
	req, _ := http.NewRequest("GET", e.gw.URL+"/one/v2/catalog", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("If-None-Match", one.etag)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match with /one's ETag: %d, want 304", res.StatusCode)
	}
	// Only the ids changed: every other byte is the broker's.
	if strings.Count(one.body, samplebroker.ServiceName) != strings.Count(raw.body, samplebroker.ServiceName) ||
		len(one.body) != len(raw.body) { // the sample broker's ids are UUIDs too: same length
		t.Errorf("/one's catalog differs from the broker's beyond the ids:\n%s\n%s", one.body, raw.body)
	}

	e.reload(t, idsRoutesYAML)
	if again := look("/one"); again.etag != one.etag || again.body != one.body {
		t.Errorf("after a reload /one shows %s %q, want the same as before (%s)", again.etag, again.services, one.etag)
	}
	restarted := e.build(t, idsRoutesYAML, nil) // a catalog cache of its own
	e.sw.Store(restarted).Close(restarted)
	if again := look("/two"); again.etag != two.etag || again.body != two.body {
		t.Errorf("after a restart /two shows %s %q, want the same as before (%s)", again.etag, again.services, two.etag)
	}

	e.reload(t, `[{broker: b, prefix: /one, ids: {namespace: cf-two}}, {broker: b, prefix: /two, ids: {namespace: "`+idsNSTwo+`"}}]`)
	const cfTwoServiceID = "b4278d15-c195-5db7-80c7-15a749473f2d" // cf-two's vector
	if got := look("/one"); !has(got.services, cfTwoServiceID) || got.etag == one.etag {
		t.Errorf("after a reload to namespace cf-two /one shows %q (%s), want %s and a new ETag", got.services, got.etag, cfTwoServiceID)
	}
}

// TestRouteIDsDashboardClient: each service's dashboard_client.id is
// derived too, and the rest of the client (secret, redirect) is the
// broker's.
func TestRouteIDsDashboardClient(t *testing.T) {
	x := routes.NewIDs(config.Route{IDs: &config.RouteIDs{Namespace: "cf-one"}})
	in := `{"services":[{"id":"svc","name":"s","dashboard_client":{"id":"client","secret":"s3","redirect_uri":"https://x"},` +
		`"plans":[{"id":"p1","name":"a"},{"name":"b","ID":"p2"}]}],"id":"not-a-service"}`
	out, err := routes.DeriveCatalogIDs([]byte(in), x)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"services":[{"id":"` + x.Derive("svc") + `","name":"s","dashboard_client":{"id":"` + x.Derive("client") + `","secret":"s3","redirect_uri":"https://x"},` +
		`"plans":[{"id":"` + x.Derive("p1") + `","name":"a"},{"name":"b","ID":"` + x.Derive("p2") + `"}]}],"id":"not-a-service"}`
	if string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
}

// testIDTable is the table of x for a catalog of the services and plans.
func testIDTable(x *routes.IDs, services, plans []string) *routes.IDTable {
	t := &routes.IDTable{Services: routes.NewIDMap(len(services)), Plans: routes.NewIDMap(len(plans))}
	for _, id := range services {
		t.Services.Add(x, id)
	}
	for _, id := range plans {
		t.Plans.Add(x, id)
	}
	return t
}

// TestRouteIDsRequestMapping: what the ids stage maps back, and what it
// leaves alone, byte for byte.
func TestRouteIDsRequestMapping(t *testing.T) {
	x := routes.NewIDs(config.Route{IDs: &config.RouteIDs{Namespace: "cf-one"}})
	tb := testIDTable(x, []string{"svc"}, []string{"p1", "p2"})
	s, p1, p2 := x.Derive("svc"), x.Derive("p1"), x.Derive("p2")
	bodies := []struct{ name, in, want string }{
		{"provision", `{"service_id":"` + s + `", "plan_id" : "` + p1 + `","parameters":{"plan_id":"` + p1 + `"}}`,
			`{"service_id":"svc", "plan_id" : "p1","parameters":{"plan_id":"` + p1 + `"}}`},
		{"update with previous_values", `{"service_id":"` + s + `","plan_id":"` + p2 + `","previous_values":{"plan_id":"` + p1 + `","service_id":"` + s + `"}}`,
			`{"service_id":"svc","plan_id":"p2","previous_values":{"plan_id":"p1","service_id":"svc"}}`},
		{"every duplicate and case", `{"service_id":"` + s + `","Service_ID":"` + s + `"}`, `{"service_id":"svc","Service_ID":"svc"}`},
		{"unknown ids pass", `{"service_id":"raw-svc","plan_id":"` + s + `"}`, `{"service_id":"raw-svc","plan_id":"` + s + `"}`},
		{"not an object", `["` + s + `"]`, `["` + s + `"]`},
		{"not JSON", `{"service_id":"` + s + `"`, `{"service_id":"` + s + `"`},
	}
	for _, b := range bodies {
		got, _, _ := tb.MapBody([]byte(b.in))
		if string(got) != b.want {
			t.Errorf("%s: got %s, want %s", b.name, got, b.want)
		}
	}
	sc := &Scope{}
	sc.Call.ServiceID, sc.Call.PlanID = s, "raw-plan"
	q, changed, _ := tb.MapQuery("accepts_incomplete=true&service_id="+s+"&plan_id=raw-plan&operation=op%201", &sc.Call)
	if want := "accepts_incomplete=true&service_id=svc&plan_id=raw-plan&operation=op%201"; !changed || q != want || sc.Call.ServiceID != "svc" || sc.Call.PlanID != "raw-plan" {
		t.Errorf("query: %q (%v), call %q %q; want %q", q, changed, sc.Call.ServiceID, sc.Call.PlanID, want)
	}
	ans, changed := x.ForwardBody([]byte(`{"service_id":"svc","plan_id":"p1","dashboard_url":"https://d","parameters":{"service_id":"svc"}}`))
	if want := `{"service_id":"` + s + `","plan_id":"` + p1 + `","dashboard_url":"https://d","parameters":{"service_id":"svc"}}`; !changed || string(ans) != want {
		t.Errorf("GET instance answer: %s, want %s", ans, want)
	}
}

// idsLifecycle runs a whole lifecycle through the route at prefix, with
// the ids that route shows, and returns what it fetched of the instance.
func idsLifecycle(t *testing.T, e *idsEnv, prefix, instance, svc, planAsync string) (fetched string) {
	t.Helper()
	step := func(name, method, path, body string, want int) string {
		t.Helper()
		res, b := e.call(t, prefix, method, path, body)
		if res.StatusCode != want {
			t.Fatalf("%s %s: %d %s, want %d", prefix, name, res.StatusCode, b, want)
		}
		return b
	}
	ipath := "/v2/service_instances/" + instance
	bpath := ipath + "/service_bindings/" + instance + "-bd"
	q := "service_id=" + svc + "&plan_id=" + planAsync
	ctx := `"context":{"platform":"cloudfoundry","organization_guid":"org","space_guid":"space"}`
	step("provision", "PUT", ipath+"?accepts_incomplete=true",
		`{"service_id":"`+svc+`","plan_id":"`+planAsync+`","organization_guid":"org","space_guid":"space",`+ctx+`}`, http.StatusAccepted)
	poll := func(want string) {
		t.Helper()
		if b := step("last_operation", "GET", ipath+"/last_operation?"+q, "", http.StatusOK); !strings.Contains(b, `"state":"`+want+`"`) {
			t.Fatalf("%s last_operation: %s, want %s", prefix, b, want)
		}
	}
	poll("in progress")
	e.clock.Advance(2 * time.Minute)
	poll("succeeded")
	step("update", "PATCH", ipath+"?accepts_incomplete=true",
		`{"service_id":"`+svc+`","plan_id":"`+planAsync+`","parameters":{},"previous_values":{"service_id":"`+svc+`","plan_id":"`+planAsync+`"},`+ctx+`}`, http.StatusAccepted)
	e.clock.Advance(2 * time.Minute)
	poll("succeeded")
	fetched = step("GET instance", "GET", ipath+"?"+q, "", http.StatusOK)
	if in, err := e.st.GetInstance(t.Context(), "b", instance); err != nil || in.ServiceID != samplebroker.ServiceID || in.PlanID != samplebroker.PlanAsyncID {
		t.Errorf("%s: the inventory holds %q %q (%v), want the broker's ids", prefix, in.ServiceID, in.PlanID, err)
	}
	step("bind", "PUT", bpath, `{"service_id":"`+svc+`","plan_id":"`+planAsync+`","bind_resource":{"app_guid":"app"},`+ctx+`}`, http.StatusCreated)
	step("GET binding", "GET", bpath+"?"+q, "", http.StatusOK)
	step("unbind", "DELETE", bpath+"?"+q, "", http.StatusOK)
	step("deprovision", "DELETE", ipath+"?accepts_incomplete=true&"+q, "", http.StatusAccepted)
	e.clock.Advance(2 * time.Minute)
	if b := step("last_operation", "GET", ipath+"/last_operation?"+q, "", http.StatusGone); b == "" {
		t.Fatalf("%s: empty 410", prefix)
	}
	return fetched
}

// TestRouteIDsLifecycle: a whole lifecycle (provision, polls, update,
// fetch, bind, GET binding, unbind, deprovision) through each of two
// routes with namespaces of their own reaches the sample broker with its
// own ids only; GET instance shows each route's ids; and the inventory
// records the broker's.
func TestRouteIDsLifecycle(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	for _, r := range []struct{ prefix, instance, svc, async string }{
		{"/one", "i-one", oneServiceID, onePlanAsyncID},
		{"/two", "i-two", twoServiceID, twoPlanAsyncID},
	} {
		fetched := idsLifecycle(t, e, r.prefix, r.instance, r.svc, r.async)
		var in struct {
			ServiceID string `json:"service_id"`
			PlanID    string `json:"plan_id"`
		}
		if err := json.Unmarshal([]byte(fetched), &in); err != nil || in.ServiceID != r.svc || in.PlanID != r.async {
			t.Errorf("%s GET instance: %s, want the route's ids %s %s", r.prefix, fetched, r.svc, r.async)
		}
	}
	checkBrokerSawOwnIDs(t, e.broker.requests(), 2*8)
}

// checkBrokerSawOwnIDs fails when a request the broker got carries an id
// none of its catalog's, or fewer than n requests carry its own.
func checkBrokerSawOwnIDs(t *testing.T, rs []brokerRequest, n int) {
	t.Helper()
	derived := []string{oneServiceID, onePlanSyncID, onePlanAsyncID, twoServiceID, twoPlanSyncID, twoPlanAsyncID}
	own := 0
	for _, r := range rs {
		for _, d := range derived {
			if strings.Contains(r.query, d) || strings.Contains(r.body, d) {
				t.Errorf("the broker got a derived id: %s %s?%s %s", r.method, r.path, r.query, r.body)
			}
		}
		if strings.Contains(r.query, samplebroker.ServiceID) || strings.Contains(r.body, samplebroker.ServiceID) {
			own++
		}
	}
	if own < n {
		t.Errorf("%d requests carried the broker's own service id, want at least %d: %v", own, n, rs)
	}
}

// TestRouteIDsPassUnchanged: an id the route's catalog does not derive
// passes unchanged, so an unknown one is refused by validation exactly as
// on a route without ids (naming the id as sent), and the broker's own
// ids (a registration made before the route had ids) keep working.
func TestRouteIDsPassUnchanged(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	unknown := `{"service_id":"no-such-service","plan_id":"` + onePlanSyncID + `","organization_guid":"org","space_guid":"space"}`
	res1, b1 := e.call(t, "/one", "PUT", "/v2/service_instances/i-1", unknown)
	resRaw, bRaw := e.call(t, "/raw", "PUT", "/v2/service_instances/i-1", strings.ReplaceAll(unknown, onePlanSyncID, samplebroker.PlanSyncID))
	if res1.StatusCode != http.StatusBadRequest || !strings.Contains(b1, `service_id \"no-such-service\" is not a service in the broker's catalog`) {
		t.Errorf("unknown service_id through /one: %d %s, want the validation's 400 naming it", res1.StatusCode, b1)
	}
	if resRaw.StatusCode != res1.StatusCode || !strings.Contains(bRaw, `\"no-such-service\" is not a service`) {
		t.Errorf("the same through /raw: %d %s, want what /one got", resRaw.StatusCode, bRaw)
	}
	if n := e.sample.Count(samplebroker.EndpointProvision); n != 0 {
		t.Errorf("the broker got %d provisions, want none", n)
	}
	own := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID + `","organization_guid":"org","space_guid":"space"}`
	if res, b := e.call(t, "/one", "PUT", "/v2/service_instances/i-2", own); res.StatusCode != http.StatusCreated {
		t.Errorf("the broker's own ids through /one: %d %s, want 201", res.StatusCode, b)
	}
	q := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	if res, b := e.call(t, "/one", "DELETE", "/v2/service_instances/i-2"+q, ""); res.StatusCode != http.StatusOK {
		t.Errorf("deprovision with the broker's own ids through /one: %d %s, want 200", res.StatusCode, b)
	}
}

// TestRouteIDsFiltered: a route's filters judge the broker's ids: its
// catalog shows the derived ids of what it lets through only, and a
// provision of a plan it hides, by its derived id, is refused naming the
// plan.
func TestRouteIDsFiltered(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	res, body := e.call(t, "/filtered", "GET", "/v2/catalog", "")
	_, plans := catalogIDs(t, body)
	if res.StatusCode != http.StatusOK || strings.Contains(body, onePlanAsyncID) || strings.Contains(body, samplebroker.PlanAsyncID) || !strings.Contains(body, onePlanSyncID) {
		t.Errorf("/filtered catalog: %d plans %q, want %s without the async plan", res.StatusCode, plans, onePlanSyncID)
	}
	if _, one := e.call(t, "/one", "GET", "/v2/catalog", ""); one == body {
		t.Error("/filtered and /one (same namespace, no filter) serve the same catalog")
	}
	res, b := e.call(t, "/filtered", "PUT", "/v2/service_instances/i-1?accepts_incomplete=true",
		`{"service_id":"`+oneServiceID+`","plan_id":"`+onePlanAsyncID+`","organization_guid":"org","space_guid":"space"}`)
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(b, `(plan \"async\" of service \"sample\") is not available to tenant \"t2\"`) {
		t.Errorf("provision of the hidden plan: %d %s, want 400 naming it", res.StatusCode, b)
	}
}

// TestRouteIDsEmulatedFetch: GET instance answered from the inventory
// (emulate.fetch for a broker that cannot) shows the route's ids.
func TestRouteIDsEmulatedFetch(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{NotRetrievable: true}, "    emulate: {fetch: true}")
	if res, b := e.call(t, "/two", "PUT", "/v2/service_instances/i-1",
		`{"service_id":"`+twoServiceID+`","plan_id":"`+twoPlanSyncID+`","organization_guid":"org","space_guid":"space"}`); res.StatusCode != http.StatusCreated {
		t.Fatalf("provision: %d %s", res.StatusCode, b)
	}
	res, b := e.call(t, "/two", "GET", "/v2/service_instances/i-1", "")
	if res.StatusCode != http.StatusOK || !strings.Contains(b, `"service_id":"`+twoServiceID+`"`) || !strings.Contains(b, `"plan_id":"`+twoPlanSyncID+`"`) {
		t.Errorf("GET instance from the inventory: %d %s, want /two's ids", res.StatusCode, b)
	}
	if n := e.sample.Count(samplebroker.EndpointGetInstance); n != 0 {
		t.Errorf("the broker got %d GET instance calls, want none (emulated)", n)
	}
	if _, b := e.call(t, "/raw", "GET", "/v2/service_instances/i-1", ""); !strings.Contains(b, `"service_id":"`+samplebroker.ServiceID+`"`) {
		t.Errorf("GET instance through /raw: %s, want the broker's ids", b)
	}
}

// TestRouteIDsWithoutCatalog: when the broker's catalog cannot be had, a
// call whose ids a route would map back is refused with 503 saying why,
// never forwarded with ids the broker never made; but the unbinds and
// deprovisions the gateway answers for a broker retired and gone get
// their 410, whatever the ids.
func TestRouteIDsWithoutCatalog(t *testing.T) {
	const query = "?service_id=" + oneServiceID + "&plan_id=" + onePlanSyncID
	for _, tc := range []struct {
		name, retired string
		want          int
		says          string
	}{
		{"broker down", "", http.StatusServiceUnavailable,
			`shows service and plan ids of its own (routes[].ids), and without the broker's catalog the gateway cannot map them back`},
		{"broker retired and gone", "    retired: {answer: gone}\n", http.StatusGone, "{}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := `
admin: {address: "off"}
brokers:
  - name: b
    url: http://` + osbtest.DeadAddr(t) + `
    validation: {without_catalog: forward}
` + tc.retired + `
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b, prefix: /one, ids: {namespace: cf-one}}]
`
			_, gw := testGateway(t, yaml, nil)
			res, b := do(t, "DELETE", gw.URL+"/one/v2/service_instances/i-1"+query, t1User, t1Pass, "2.17", nil)
			if res.StatusCode != tc.want || !strings.Contains(b, tc.says) {
				t.Errorf("deprovision without a catalog: %d %s, want %d saying %s", res.StatusCode, b, tc.want, tc.says)
			}
		})
	}
}

// BenchmarkRouteIDs measures what routes[].ids costs, each row on top of
// the scope, route fields and classify stages, the ids stage and (for the
// catalog) the catalog stage: a route without ids ("plain") against one
// with ("ids"), on the catalog from the cache, a poll carrying service_id
// and plan_id, and a provision's body.
func BenchmarkRouteIDs(b *testing.B) {
	g := benchGateway(b)
	if err := g.WarmCatalogs(b.Context()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(nil) })
	tn := mustTenant(b, &g.cfg.Tenants[0])
	plain := newRoute("/t1/b1", tn, g.upstreams["b1"])
	withIDs := newRoute("/t1/ids", tn, g.upstreams["b1"])
	withIDs.IDs = routes.NewIDs(config.Route{IDs: &config.RouteIDs{Namespace: "cf-one"}})
	table := routeTable{plain.Prefix: plain, withIDs.Prefix: withIDs}
	x := routes.IDsOf(withIDs)
	const poll = "/v2/service_instances/i-1/last_operation"
	const provision = "/v2/service_instances/i-1"
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	body := func(svc, plan string) []byte {
		return []byte(`{"service_id":"` + svc + `","plan_id":"` + plan + `","organization_guid":"org","space_guid":"space","context":{"platform":"cloudfoundry"}}`)
	}
	for _, row := range []struct {
		name, method, path, query string
		rt                        *route
		body                      []byte
	}{
		{"catalog/plain", "GET", "/v2/catalog", "", plain, nil},
		{"catalog/ids", "GET", "/v2/catalog", "", withIDs, nil},
		{"poll/plain", "GET", poll, "operation=op1&service_id=s1&plan_id=p1", plain, nil},
		{"poll/ids", "GET", poll, "operation=op1&service_id=" + x.Derive("s1") + "&plan_id=" + x.Derive("p1"), withIDs, nil},
		{"provision/plain", "PUT", provision, "", plain, body("s1", "p1")},
		{"provision/ids", "PUT", provision, "", withIDs, body(x.Derive("s1"), x.Derive("p1"))},
	} {
		b.Run(row.name, func(b *testing.B) {
			prefill := func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					s := ScopeOf(w, r)
					s.Body = row.body
					next.ServeHTTP(w, r)
				})
			}
			h := Stack(terminal, withScope(time.Now), prefillRoute(row.rt, row.path), prefill, request.WithClassify(),
				routes.WithIDs(table, g.catalogs), routes.WithCatalog(g.catalogs))
			r := httptest.NewRequest(row.method, row.rt.Prefix+row.path+"?"+row.query, nil)
			r.SetBasicAuth(t1User, t1Pass)
			r.Header.Set("X-Broker-API-Version", "2.14")
			benchServe(b, h, r)
		})
	}
}

// FuzzRouteIDsMapBody: mapping a body back never breaks it: valid JSON
// stays valid, decodes to the same document but for the service_id and
// plan_id strings mapped (at the top and in previous_values), and a body
// without a derived id passes byte for byte.
func FuzzRouteIDsMapBody(f *testing.F) {
	x := routes.NewIDs(config.Route{IDs: &config.RouteIDs{Namespace: "cf-one"}})
	tb := testIDTable(x, []string{"svc"}, []string{"p1"})
	s, p := x.Derive("svc"), x.Derive("p1")
	for _, seed := range []string{
		`{"service_id":"` + s + `","plan_id":"` + p + `","previous_values":{"plan_id":"` + p + `"}}`,
		`{"SERVICE_ID":"` + s + `","service\u005fid":"` + s + `","plan_id":7}`,
		`{"previous_values":{"previous_values":{"plan_id":"` + p + `"}},"parameters":{"service_id":"` + s + `"}}`,
		` {"plan_id" : "` + p + `" } `, `[]`, `{"service_id":"{` + s + `}","plan_id":"` + strings.ToUpper(p) + `"}`, `{"a":"b"}`, `{"service_id":"\u00e9"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, changed, _ := tb.MapBody(in)
		if !changed {
			if !bytes.Equal(out, in) {
				t.Fatalf("unchanged body rewritten: %q -> %q", in, out)
			}
			return
		}
		var a, b any
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("mapped body is no JSON: %q -> %q: %v", in, out, err)
		}
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("a body that is no JSON was mapped: %q", in)
		}
		unmap := func(v any) any {
			m, ok := v.(map[string]any)
			if !ok {
				return v
			}
			fix := func(m map[string]any) {
				for k, val := range m {
					str, ok := val.(string)
					if !ok {
						continue
					}
					switch strings.ToLower(k) {
					case "service_id", "plan_id":
						if str == "svc" {
							m[k] = s
						} else if str == "p1" {
							m[k] = p
						}
					}
				}
			}
			fix(m)
			for k, pv := range m {
				if pm, ok := pv.(map[string]any); ok && strings.EqualFold(k, "previous_values") {
					fix(pm)
				}
			}
			return m
		}
		ja, _ := json.Marshal(unmap(a))
		jb, _ := json.Marshal(unmap(b))
		if !bytes.Equal(ja, jb) {
			t.Fatalf("mapping changed more than the ids:\n%s\n%s", ja, jb)
		}
	})
}
