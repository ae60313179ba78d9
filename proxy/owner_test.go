package proxy

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// ownerEnv is the sample broker (2.17, synchronous plan) shared by two
// tenants: cf through /cf (the broker's ids) and /cf-ids (namespace
// cf-one), dev through /dev (the broker's ids) and /dev-ids (namespace
// idsNSTwo).
type ownerEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *recordingBroker
	st     *hookStore
}

// ownerRoute is a route of ownerEnv and the ids a platform sends on it.
type ownerRoute struct {
	prefix, user, pass, service, plan string
}

var (
	cfPlain  = ownerRoute{"/cf", "cf-user", "cf-pass", samplebroker.ServiceID, samplebroker.PlanSyncID}
	cfIDs    = ownerRoute{"/cf-ids", "cf-user", "cf-pass", oneServiceID, onePlanSyncID}
	devPlain = ownerRoute{"/dev", "dev-user", "dev-pass", samplebroker.ServiceID, samplebroker.PlanSyncID}
	devIDs   = ownerRoute{"/dev-ids", "dev-user", "dev-pass", twoServiceID, twoPlanSyncID}
)

// hookStore is a store whose GetInstance can fail and whose Acquire runs
// a hook first, for the owner stage's races and outages.
type hookStore struct {
	store.Store
	failGet   atomic.Bool
	onAcquire atomic.Pointer[func()]
}

func (h *hookStore) GetInstance(ctx context.Context, broker, id string) (store.Instance, error) {
	if h.failGet.Load() {
		return store.Instance{}, fmt.Errorf("%w: injected", store.ErrUnavailable)
	}
	return h.Store.GetInstance(ctx, broker, id)
}

func (h *hookStore) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	if f := h.onAcquire.Swap(nil); f != nil {
		(*f)()
	}
	return h.Store.Acquire(ctx, l)
}

// AcquireReading is Acquire and GetInstance above, hook and failure
// included.
func (h *hookStore) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	return store.AcquireThenRead(ctx, h, l)
}

func newOwnerEnv(t *testing.T) *ownerEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: "sample", Password: idsBrokerSecret, Now: clock.Now})
	rec := &recordingBroker{h: sample}
	bs := httptest.NewServer(rec)
	t.Cleanup(bs.Close)
	yaml := `
admin: {address: "off"}
brokers:
  - name: b
    url: ` + bs.URL + `
    username: sample
    password: ` + idsBrokerSecret + `
    api_version: {max: "2.17"}
tenants:
  - name: cf
    credentials: [{username: cf-user, password: cf-pass}]
    routes: [{broker: b, prefix: /cf}, {broker: b, prefix: /cf-ids, ids: {namespace: cf-one}}]
  - name: dev
    credentials: [{username: dev-user, password: dev-pass}]
    routes: [{broker: b, prefix: /dev}, {broker: b, prefix: /dev-ids, ids: {namespace: "` + idsNSTwo + `"}}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mem, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	st := &hookStore{Store: mem}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &ownerEnv{g: g, gw: gw, broker: rec, st: st}
}

// instanceCalls counts the broker's calls but catalog fetches.
func (e *ownerEnv) instanceCalls() int {
	n := 0
	for _, r := range e.broker.requests() {
		if r.path != "/v2/catalog" {
			n++
		}
	}
	return n
}

// call sends method path (with %s for the route's service and plan ids,
// in that order, where the path or body has them) through rt at version.
func (e *ownerEnv) call(t *testing.T, rt ownerRoute, version, method, path, body string) (*http.Response, string) {
	t.Helper()
	path = strings.ReplaceAll(strings.ReplaceAll(path, "{svc}", rt.service), "{plan}", rt.plan)
	var in io.Reader
	if body != "" {
		in = strings.NewReader(strings.ReplaceAll(strings.ReplaceAll(body, "{svc}", rt.service), "{plan}", rt.plan))
	}
	return do(t, method, e.gw.URL+rt.prefix+path, rt.user, rt.pass, version, in)
}

const ownerProvisionBody = `{"service_id":"{svc}","plan_id":"{plan}","organization_guid":"o","space_guid":"s"}`

// make provisions instance id and binds binding bid through rt, and
// returns the binding's answer (its credentials).
func (e *ownerEnv) make(t *testing.T, rt ownerRoute, id, bid string) string {
	t.Helper()
	if res, body := e.call(t, rt, "2.17", "PUT", "/v2/service_instances/"+id, ownerProvisionBody); res.StatusCode != http.StatusCreated {
		t.Fatalf("provision %s through %s: %d %s", id, rt.prefix, res.StatusCode, body)
	}
	res, body := e.call(t, rt, "2.17", "PUT", "/v2/service_instances/"+id+"/service_bindings/"+bid, `{"service_id":"{svc}","plan_id":"{plan}"}`)
	if res.StatusCode != http.StatusCreated || !strings.Contains(body, "password") {
		t.Fatalf("bind %s/%s through %s: %d %s", id, bid, rt.prefix, res.StatusCode, body)
	}
	return body
}

// ownerCall is one call of the cross-tenant matrix on instance {id} and
// its binding {bid}.
type ownerCall struct {
	name, method, path, body string
	status                   int // at 2.17
	status213                int // at 2.13, where it differs (0: the same)
}

var ownerCalls = []ownerCall{
	{"GET instance", "GET", "/v2/service_instances/{id}", "", 404, 0},
	{"PATCH", "PATCH", "/v2/service_instances/{id}", `{"service_id":"{svc}","plan_id":"{plan}"}`, 404, 400},
	{"bind", "PUT", "/v2/service_instances/{id}/service_bindings/dev-b", `{"service_id":"{svc}","plan_id":"{plan}"}`, 404, 400},
	{"GET binding", "GET", "/v2/service_instances/{id}/service_bindings/{bid}", "", 404, 0},
	{"binding last_operation", "GET", "/v2/service_instances/{id}/service_bindings/{bid}/last_operation", "", 410, 0},
	{"unbind", "DELETE", "/v2/service_instances/{id}/service_bindings/{bid}?service_id={svc}&plan_id={plan}", "", 410, 0},
	{"last_operation", "GET", "/v2/service_instances/{id}/last_operation", "", 410, 0},
	{"DELETE", "DELETE", "/v2/service_instances/{id}?service_id={svc}&plan_id={plan}", "", 410, 0},
	{"provision", "PUT", "/v2/service_instances/{id}", ownerProvisionBody, 409, 0},
}

// TestOwnerCrossTenantMatrix: tenant dev, with its own credentials and
// routes, reached every instance of tenant cf on the broker both route to
// (GET 200, PATCH 200, bind 201 with fresh credentials, cf's binding's
// credentials, unbind and DELETE 200). Now every call of dev's, on its
// plain and its ids route, on cf's instances made through either of cf's
// routes, gets the answer for an instance the broker does not hold, the
// broker is not called, and no credential crosses; cf's own calls, from
// either of its routes (one tenant's ids registrations reach each other's
// instances), still work.
func TestOwnerCrossTenantMatrix(t *testing.T) {
	e := newOwnerEnv(t)
	creds := map[string]string{
		"cf-plain": e.make(t, cfPlain, "cf-plain", "cf-plain-b"),
		"cf-ids":   e.make(t, cfIDs, "cf-ids", "cf-ids-b"),
	}
	for _, rt := range []ownerRoute{devPlain, devIDs} {
		for _, id := range []string{"cf-plain", "cf-ids"} {
			for _, version := range []string{"2.17", "2.13"} {
				for _, c := range ownerCalls {
					t.Run(rt.prefix+"/"+id+"/"+version+"/"+c.name, func(t *testing.T) {
						if version == "2.13" && c.method == "GET" && c.name != "last_operation" {
							t.Skip("GET instance, GET binding and binding polls are 2.14's")
						}
						want := c.status
						if version == "2.13" && c.status213 != 0 {
							want = c.status213
						}
						before := e.instanceCalls()
						path := strings.ReplaceAll(strings.ReplaceAll(c.path, "{id}", id), "{bid}", id+"-b")
						res, body := e.call(t, rt, version, c.method, path, c.body)
						if res.StatusCode != want {
							t.Fatalf("%d %s, want %d", res.StatusCode, body, want)
						}
						if n := e.instanceCalls() - before; n != 0 {
							t.Errorf("the broker got %d calls: %v", n, e.broker.requests())
						}
						if !strings.Contains(body, `"description"`) || strings.Contains(body, "password") || strings.Contains(body, `"cf"`) {
							t.Errorf("body %s: want a description naming neither the owner nor a credential", body)
						}
					})
				}
			}
		}
	}
	// The owner's calls, from either of its routes, reach its instances.
	for _, c := range []struct {
		rt             ownerRoute
		method, path   string
		status         int
		wantCredential string
	}{
		{cfIDs, "GET", "/v2/service_instances/cf-plain", 200, ""},
		{cfPlain, "GET", "/v2/service_instances/cf-ids/service_bindings/cf-ids-b", 200, creds["cf-ids"]},
		{cfPlain, "DELETE", "/v2/service_instances/cf-plain/service_bindings/cf-plain-b?service_id={svc}&plan_id={plan}", 200, ""},
		{cfPlain, "DELETE", "/v2/service_instances/cf-plain?service_id={svc}&plan_id={plan}", 200, ""},
	} {
		res, body := e.call(t, c.rt, "2.17", c.method, c.path, "")
		if res.StatusCode != c.status {
			t.Errorf("cf %s %s: %d %s", c.method, c.path, res.StatusCode, body)
		}
		if c.wantCredential != "" && !strings.Contains(body, `"password"`) {
			t.Errorf("cf's own binding without its credentials: %s", body)
		}
	}
	// Once cf deleted it, the id is free: dev may provision it.
	if res, body := e.call(t, devPlain, "2.17", "PUT", "/v2/service_instances/cf-plain", ownerProvisionBody); res.StatusCode != http.StatusCreated {
		t.Errorf("dev provisions the id cf deleted: %d %s", res.StatusCode, body)
	}
}

// TestOwnerUnknownInstanceIsAdopted: an instance the inventory holds no
// owner for (a record without a tenant: made before the inventory named
// owners, or imported without one) is nobody's: the first tenant whose
// call on it succeeds owns it, and the other is kept off from then on.
func TestOwnerUnknownInstanceIsAdopted(t *testing.T) {
	e := newOwnerEnv(t)
	e.make(t, cfPlain, "old", "old-b")
	ctx := context.Background()
	in, err := e.st.GetInstance(ctx, "b", "old")
	if err != nil {
		t.Fatal(err)
	}
	in.Tenant = "" // as a record from before tenants were recorded
	if _, err := e.st.PutInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	if res, body := e.call(t, devPlain, "2.17", "PATCH", "/v2/service_instances/old", `{"service_id":"{svc}","plan_id":"{plan}"}`); res.StatusCode != http.StatusOK {
		t.Fatalf("dev's update of an instance of nobody's: %d %s", res.StatusCode, body)
	}
	if in, _ = e.st.GetInstance(ctx, "b", "old"); in.Tenant != "dev" {
		t.Errorf("after dev's update the record's tenant is %q, want dev (adopted)", in.Tenant)
	}
	before := e.instanceCalls()
	if res, body := e.call(t, cfPlain, "2.17", "GET", "/v2/service_instances/old", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("cf's GET of the instance dev adopted: %d %s", res.StatusCode, body)
	}
	if e.instanceCalls() != before {
		t.Errorf("the broker was called")
	}
}

// TestOwnerOperationInFlight: an instance another tenant is provisioning
// has no record yet, but its lock names the tenant: a read of it by
// another tenant is refused, not sent to a broker that may already hold it;
// a mutating call is blocked by the lock. Neither reaches the broker.
func TestOwnerOperationInFlight(t *testing.T) {
	e := newOwnerEnv(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := e.st.Acquire(context.Background(), store.Lock{Key: store.LockKey("b", "flying"), Owner: "cf-replica", Kind: store.KindProvision,
		Tenant: "cf", Broker: "b", InstanceID: "flying", Started: now, Deadline: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path, body string
		status             int
	}{
		{"GET", "/v2/service_instances/flying", "", 404},
		{"GET", "/v2/service_instances/flying/last_operation", "", 410},
		{"PATCH", "/v2/service_instances/flying", `{"service_id":"{svc}","plan_id":"{plan}"}`, 400},
	} {
		before := e.instanceCalls()
		if res, body := e.call(t, devPlain, "2.17", c.method, c.path, c.body); res.StatusCode != c.status {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, res.StatusCode, body, c.status)
		}
		if e.instanceCalls() != before {
			t.Errorf("%s %s reached the broker", c.method, c.path)
		}
	}
}

// TestOwnerLookedAtAgainUnderTheLock: cf's provision ended, and recorded
// the instance, between dev's call's first look (nobody's) and its lock;
// the look under the lock sees cf's record, and the broker is not called.
func TestOwnerLookedAtAgainUnderTheLock(t *testing.T) {
	e := newOwnerEnv(t)
	ctx := context.Background()
	record := func() {
		if _, err := e.st.PutInstance(ctx, store.Instance{Broker: "b", InstanceID: "raced", Tenant: "cf",
			LastOperation: store.LastOperation{Kind: store.KindProvision, State: store.StateSucceeded}}); err != nil {
			t.Error(err)
		}
	}
	e.st.onAcquire.Store(&record)
	before := e.instanceCalls()
	res, body := e.call(t, devPlain, "2.17", "PATCH", "/v2/service_instances/raced", `{"service_id":"{svc}","plan_id":"{plan}"}`)
	if res.StatusCode != http.StatusNotFound {
		t.Errorf("dev's update raced by cf's provision: %d %s, want 404", res.StatusCode, body)
	}
	if e.instanceCalls() != before {
		t.Errorf("the broker was called: %v", e.broker.requests())
	}
	if l, err := e.st.List(ctx, store.ListFilter{}); err != nil || len(l) != 0 {
		t.Errorf("locks left: %v %v", l, err)
	}
}

// TestOwnerHeldLookFailsClosed: a mutating call whose look under the lock
// cannot read the instance's record (read in the round trip that took
// the lock, store.Store.AcquireReading) is 503 without reaching the
// broker, and its lock goes.
func TestOwnerHeldLookFailsClosed(t *testing.T) {
	e := newOwnerEnv(t)
	ctx := context.Background()
	failReads := func() { e.st.failGet.Store(true) } // after the first look, before the second
	e.st.onAcquire.Store(&failReads)
	before := e.instanceCalls()
	res, body := e.call(t, devPlain, "2.17", "PUT", "/v2/service_instances/unseen", ownerProvisionBody)
	if res.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("provision whose look under the lock failed: %d %s, want 503", res.StatusCode, body)
	}
	if e.instanceCalls() != before {
		t.Errorf("the broker was called: %v", e.broker.requests())
	}
	e.st.failGet.Store(false)
	waitFor(t, func() bool {
		e.g.guard.Retry.RetryNow()
		l, err := e.st.List(ctx, store.ListFilter{})
		return err == nil && len(l) == 0
	})
}

// TestOwnerStoreDownFailsClosed: on a shared broker, a call whose owner
// cannot be read is 503, a read too (a guess could hand one tenant
// another's credentials), and the broker is not called.
func TestOwnerStoreDownFailsClosed(t *testing.T) {
	e := newOwnerEnv(t)
	e.make(t, cfPlain, "i", "i-b")
	e.st.failGet.Store(true)
	before := e.instanceCalls()
	for _, path := range []string{"/v2/service_instances/i", "/v2/service_instances/i/service_bindings/i-b"} {
		res, body := e.call(t, devPlain, "2.17", "GET", path, "")
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "cannot tell whether tenant") {
			t.Errorf("GET %s with the store down: %d %s", path, res.StatusCode, body)
		}
	}
	if e.instanceCalls() != before {
		t.Errorf("the broker was called")
	}
}
