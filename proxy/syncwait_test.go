package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/rules"
)

const syncWaitYAML = `
admin: {address: "off"}
state: {backend: memory}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 10s
    orphan_mitigation: mitigate
    validation: {responses: enforce}
    emulate:
      sync_within: ${WITHIN}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

// syncEnv is a gateway with emulate.sync_within before the sample broker
// (async-only bindings), both on one injected clock, every broker request
// recorded. The gateway's waits between polls move the clock instead of
// sleeping (upstream.pause); once the clock reaches holdFrom, each wait
// also waits for a step from the test.
type syncEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *samplebroker.Broker
	seen   *osbtest.Broker
	clock  *osbtest.Clock
	start  time.Time

	mu       sync.Mutex
	waits    []time.Duration // every wait between two polls, in order
	holdFrom time.Time       // zero: never hold
	steps    chan struct{}
}

// newSyncEnv starts it with emulate.sync_within within ("0s": off), the
// broker's operations taking delay; catalog, when set, rewrites the
// broker's catalog.
func newSyncEnv(t *testing.T, within string, delay time.Duration, catalog func(string) string) *syncEnv {
	t.Helper()
	return newSyncEnvWith(t, within, delay, catalog, Options{})
}

// newSyncEnvWith is newSyncEnv with the tracing and metrics of opts.
func newSyncEnvWith(t *testing.T, within string, delay time.Duration, catalog func(string) string, opts Options) *syncEnv {
	t.Helper()
	e := &syncEnv{start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), steps: make(chan struct{})}
	e.clock = osbtest.NewClock(e.start)
	e.broker = samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: delay,
		Now: e.clock.Now, AsyncOnlyBindings: true})
	e.seen = osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		if catalog == nil || r.URL.Path != "/v2/catalog" {
			e.broker.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		e.broker.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, catalog(rec.Body.String()))
	})
	vars := map[string]string{"URL": e.seen.URL, "WITHIN": within}
	cfg, err := config.Parse([]byte(syncWaitYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, e.clock.Now)
	opts.Logger, opts.Now, opts.Store = slog.New(slog.DiscardHandler), e.clock.Now, st
	e.g, err = New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.g.Close(nil) }) // stops what polls on after a 504
	e.g.upstreams["b"].Pause = e.pause
	e.gw = httptest.NewServer(e.g)
	t.Cleanup(e.gw.Close)
	return e
}

func (e *syncEnv) pause(ctx context.Context, d time.Duration) error {
	e.mu.Lock()
	e.waits = append(e.waits, d)
	hold := !e.holdFrom.IsZero() && !e.clock.Now().Before(e.holdFrom)
	e.mu.Unlock()
	if hold {
		select {
		case <-e.steps:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	e.clock.Advance(d)
	return nil
}

func (e *syncEnv) recordedWaits() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.waits...)
}

// send sends a platform request at version 2.15 without
// accepts_incomplete and returns the status and the body.
func (e *syncEnv) send(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return e.sendAt(t, "2.15", method, path, body)
}

func (e *syncEnv) sendAt(t *testing.T, version, method, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.gw.URL+"/t1/b"+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", version)
	req.Header.Set("X-Broker-API-Request-Identity", "req-"+method)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// valid checks an answer the platform got against the response rules of
// its version.
func valid(t *testing.T, c rules.Call, status int, body string) {
	t.Helper()
	if _, vs := rules.CheckResponse(c, osb.Version{Major: 2, Minor: 15}, status, []byte(body), nil, rules.ResponseOptions{}); len(vs) != 0 {
		t.Errorf("%s answer %d %s breaks the response rules: %v", c.Endpoint, status, body, vs)
	}
}

// fields decodes a JSON object answer.
func fields(t *testing.T, body string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	return m
}

// brokerCalls is what reached the broker for path (without query),
// "METHOD query" each.
func (e *syncEnv) brokerCalls(path string) []string {
	var out []string
	for _, r := range e.seen.Requests() {
		if r.URL.Path == path {
			out = append(out, r.Method+" "+r.URL.RawQuery)
		}
	}
	return out
}

const (
	syncInstance = "/v2/service_instances/sw-1"
	syncBinding  = syncInstance + "/service_bindings/swb-1"
)

var asyncProvisionBody = provisionBody(samplebroker.PlanAsyncID, "")

// TestSyncWithinInstance: a provision, update and deprovision of the async
// plan without accepts_incomplete, which the broker refuses with 422
// AsyncRequired, are repeated with the flag and answered synchronously
// once the broker's operation ended: 201 with the dashboard_url (and no
// operation), 200 {} and 200 {}. The repeat carries the same body,
// broker credentials, version and request identity; the waits between
// polls follow the broker's Retry-After (1s); the lock is released.
func TestSyncWithinInstance(t *testing.T) {
	e := newSyncEnv(t, "50s", 3*time.Second, nil)
	status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody)
	if status != http.StatusCreated {
		t.Fatalf("provision: %d %s", status, body)
	}
	want := map[string]any{"dashboard_url": "https://sample-broker.invalid/dashboard/sw-1"}
	if diff := cmp.Diff(want, fields(t, body)); diff != "" {
		t.Errorf("provision answer (-want +got):\n%s", diff)
	}
	valid(t, rules.Call{Endpoint: rules.Provision}, status, body)
	if in, err := e.g.guard.St.GetInstance(context.Background(), "b", "sw-1"); err != nil || in.DashboardURL != want["dashboard_url"] {
		t.Errorf("inventory: %+v, %v; want the instance the platform got, with its dashboard_url", in, err)
	}
	if diff := cmp.Diff([]time.Duration{emulate.SyncPollFirst, time.Second, time.Second, time.Second}, e.recordedWaits()); diff != "" {
		t.Errorf("waits between polls (-want +got):\n%s", diff)
	}
	reqs := e.seen.Requests()
	var puts []*http.Request
	for _, r := range reqs {
		if r.Method == "PUT" {
			puts = append(puts, r)
		}
	}
	if len(puts) != 2 {
		t.Fatalf("%d provisions reached the broker, want 2", len(puts))
	}
	first, repeat := puts[0], puts[1]
	if first.URL.Query().Has("accepts_incomplete") || repeat.URL.Query().Get("accepts_incomplete") != "true" {
		t.Errorf("queries %q then %q, want none then accepts_incomplete=true", first.URL.RawQuery, repeat.URL.RawQuery)
	}
	for _, h := range []string{"Authorization", "X-Broker-Api-Version", "X-Broker-Api-Request-Identity"} {
		if a, b := first.Header.Get(h), repeat.Header.Get(h); a != b || a == "" {
			t.Errorf("%s: %q then %q", h, a, b)
		}
	}
	if b1, b2 := readAll(first.Body), readAll(repeat.Body); b1 != b2 || b1 != asyncProvisionBody {
		t.Errorf("bodies %q then %q, want %q twice", b1, b2, asyncProvisionBody)
	}
	if got := repeat.Header.Get("X-Broker-Api-Request-Identity"); got != "req-PUT" {
		t.Errorf("request identity %q, want the platform's", got)
	}
	polls := e.brokerCalls(syncInstance + "/last_operation")
	if len(polls) != 4 || !strings.Contains(polls[0], "operation=provision-") {
		t.Errorf("polls %q, want 4 with the 202's operation", polls)
	}

	status, body = e.send(t, "PATCH", syncInstance, `{"service_id":"`+samplebroker.ServiceID+`","parameters":{"x":1}}`)
	if status != http.StatusOK {
		t.Fatalf("update: %d %s", status, body)
	}
	valid(t, rules.Call{Endpoint: rules.Update}, status, body)
	status, body = e.send(t, "DELETE", syncInstance+"?service_id="+samplebroker.ServiceID+"&plan_id="+samplebroker.PlanAsyncID, "")
	if status != http.StatusOK || body != "{}" {
		t.Fatalf("deprovision: %d %s, want 200 {}", status, body)
	}
	valid(t, rules.Call{Endpoint: rules.Deprovision}, status, body)
	if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
}

func readAll(r io.Reader) string {
	b, _ := io.ReadAll(r)
	return string(b)
}

// TestSyncWithinBinding: a bind and an unbind without accepts_incomplete to
// a broker whose bindings are asynchronous only get 201 with the
// credentials of the broker's GET binding (without its parameters), and
// 200 {}.
func TestSyncWithinBinding(t *testing.T) {
	e := newSyncEnv(t, "50s", 3*time.Second, nil)
	if status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody); status != http.StatusCreated {
		t.Fatalf("provision: %d %s", status, body)
	}
	bindBody := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","app_guid":"app-1","parameters":{"role":"ro"}}`
	status, body := e.send(t, "PUT", syncBinding, bindBody)
	if status != http.StatusCreated {
		t.Fatalf("bind: %d %s", status, body)
	}
	valid(t, rules.Call{Endpoint: rules.Bind}, status, body)
	got := fields(t, body)
	creds, _ := got["credentials"].(map[string]any)
	if creds["password"] == nil || got["parameters"] != nil {
		t.Errorf("bind answer %s, want credentials and no parameters", body)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", syncBinding, nil)
	req.SetBasicAuth("sample", "sample-secret")
	req.Header.Set("X-Broker-API-Version", "2.15")
	e.broker.ServeHTTP(rec, req)
	if diff := cmp.Diff(fields(t, rec.Body.String())["credentials"], got["credentials"]); diff != "" {
		t.Errorf("credentials (-broker's GET binding +platform's):\n%s", diff)
	}
	if _, err := e.g.guard.St.GetBinding(context.Background(), "b", "sw-1", "swb-1"); err != nil {
		t.Errorf("inventory: %v; want the binding the platform got", err)
	}
	if calls := e.brokerCalls(syncBinding); len(calls) != 3 || calls[2] != "GET " {
		t.Errorf("binding calls %q, want the bind, its repeat and GET binding", calls)
	}

	status, body = e.send(t, "DELETE", syncBinding+"?service_id="+samplebroker.ServiceID+"&plan_id="+samplebroker.PlanAsyncID, "")
	if status != http.StatusOK || body != "{}" {
		t.Fatalf("unbind: %d %s, want 200 {}", status, body)
	}
	valid(t, rules.Call{Endpoint: rules.Unbind}, status, body)
}

// TestSyncWithinUnfetched: a bind that succeeded whose GET binding fails
// gets the platform a 502 saying so; the binding it never got is an orphan
// candidate, and the lock is released.
func TestSyncWithinUnfetched(t *testing.T) {
	e := newSyncEnv(t, "50s", 3*time.Second, nil)
	if status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody); status != http.StatusCreated {
		t.Fatalf("provision: %d %s", status, body)
	}
	if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointGetBinding, Status: 500, Count: 1}); err != nil {
		t.Fatal(err)
	}
	bindBody := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","app_guid":"app-1"}`
	status, body := e.send(t, "PUT", syncBinding, bindBody)
	if status != http.StatusBadGateway || !strings.Contains(body, "its GET binding, where the credentials come from, failed: it answered 500") {
		t.Fatalf("bind: %d %s, want 502 naming GET binding", status, body)
	}
	ctx := context.Background()
	orphans, _ := e.g.guard.St.ListOrphans(ctx)
	if len(orphans) != 1 || orphans[0].Kind != store.KindUnbind || orphans[0].NextAttempt.After(e.clock.Now()) {
		t.Fatalf("orphans %+v, want the unbind, due", orphans)
	}
	if locks, _ := e.g.guard.St.List(ctx, store.ListFilter{}); len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointUnbind); n != 1 {
		t.Errorf("%d unbinds, want the mitigation's", n)
	}
}

// TestSyncWithinFailed: an operation the broker reports failed reaches the
// platform as 400 with the broker's description, which no platform
// mitigates (Cloud Controller's record); the gateway records no orphan and
// releases the lock.
func TestSyncWithinFailed(t *testing.T) {
	e := newSyncEnv(t, "50s", 3*time.Second, nil)
	if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, FailOperation: true}); err != nil {
		t.Fatal(err)
	}
	status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody)
	want := map[string]any{"description": `broker "b" reported the asynchronous provision failed: Provisioning failed (injected fault).`}
	if status != http.StatusBadRequest {
		t.Fatalf("provision: %d %s, want 400", status, body)
	}
	if diff := cmp.Diff(want, fields(t, body)); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	valid(t, rules.Call{Endpoint: rules.Provision}, status, body)
	ctx := context.Background()
	if orphans, _ := e.g.guard.St.ListOrphans(ctx); len(orphans) != 0 {
		t.Errorf("orphans after a failed operation: %+v", orphans)
	}
	if locks, _ := e.g.guard.St.List(ctx, store.ListFilter{}); len(locks) != 0 {
		t.Errorf("locks left: %+v", locks)
	}
}

// TestSyncWithinTimeout: an operation that outlives sync_within gets a 504
// naming it; the instance stays locked (another call gets 400) while the
// broker works, and the provision is an orphan candidate, not yet due. The
// gateway polls on: once the operation ends, the lock is released and the
// orphan is due, and its mitigation deprovisions the instance the
// platform never got.
func TestSyncWithinTimeout(t *testing.T) {
	e := newSyncEnv(t, "50s", 2*time.Minute, nil)
	e.holdFrom = e.start.Add(50 * time.Second)
	status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody)
	if status != http.StatusGatewayTimeout || !strings.Contains(body, "emulate.sync_within (50s)") {
		t.Fatalf("provision: %d %s, want 504 naming emulate.sync_within", status, body)
	}
	valid(t, rules.Call{Endpoint: rules.Provision}, status, body)
	if now := e.clock.Now(); now.Sub(e.start) != 50*time.Second {
		t.Errorf("answered %s after the request, want at the bound (50s)", now.Sub(e.start))
	}
	if status, body := e.send(t, "PATCH", syncInstance, `{"service_id":"`+samplebroker.ServiceID+`"}`); status != http.StatusBadRequest {
		t.Fatalf("update while the broker provisions: %d %s, want 400", status, body)
	}
	ctx := context.Background()
	key := store.LockKey("b", "sw-1")
	l, err := e.g.guard.St.Get(ctx, key)
	if err != nil || !l.Async || !strings.HasPrefix(l.Operation, "provision-") {
		t.Fatalf("lock %+v, %v: want the async provision", l, err)
	}
	orphans, _ := e.g.guard.St.ListOrphans(ctx)
	if len(orphans) != 1 || !orphans[0].NextAttempt.Equal(l.Deadline) || !strings.Contains(orphans[0].Reason, "sync_within") {
		t.Fatalf("orphans %+v, want one due at the lock's deadline %s", orphans, l.Deadline)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 0 {
		t.Fatalf("%d deprovisions while the broker provisions", n)
	}

	// The broker finishes; the gateway's next poll sees it.
	e.clock.Advance(2 * time.Minute)
	e.steps <- struct{}{}
	waitFor(t, func() bool { // the lock's release
		_, err := e.g.guard.St.Get(ctx, key)
		return errors.Is(err, store.ErrNotFound)
	})
	orphans, _ = e.g.guard.St.ListOrphans(ctx)
	if len(orphans) != 1 || orphans[0].NextAttempt.After(e.clock.Now()) {
		t.Fatalf("orphans %+v, want one due now", orphans)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Errorf("%d deprovisions after the operation ended, want the mitigation's", n)
	}
	// The broker deletes asynchronously (202): the orphan stays until a
	// later attempt's poll sees the deletion succeed.
	if orphans, _ := e.g.guard.St.ListOrphans(ctx); len(orphans) != 1 || !orphans[0].Undoing {
		t.Fatalf("orphans %+v, want the one being deleted", orphans)
	}
	e.clock.Advance(time.Hour)
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Errorf("%d deprovisions, want the one the poll followed", n)
	}
	if orphans, _ := e.g.guard.St.ListOrphans(ctx); len(orphans) != 0 {
		t.Errorf("orphans left: %+v", orphans)
	}
}

// TestSyncWithinDeadline: a deprovision whose operation outlives both
// sync_within and the lock's deadline (state.operation_deadline) keeps the
// instance locked until that deadline, then the lock expires and calls
// reach the broker again.
func TestSyncWithinDeadline(t *testing.T) {
	e := newSyncEnv(t, "50s", time.Hour, nil)
	// The platform provisions with the flag this time, and polls.
	status, body := e.sendFlagged(t, "PUT", syncInstance, asyncProvisionBody)
	if status != http.StatusAccepted {
		t.Fatalf("provision: %d %s", status, body)
	}
	e.clock.Advance(time.Hour)
	if status, body := e.send(t, "GET", syncInstance+"/last_operation", ""); status != http.StatusOK || !strings.Contains(body, "succeeded") {
		t.Fatalf("last_operation: %d %s", status, body)
	}
	begun := e.clock.Now()
	e.mu.Lock()
	e.holdFrom = begun.Add(50 * time.Second)
	e.mu.Unlock()
	status, body = e.send(t, "DELETE", syncInstance+"?service_id="+samplebroker.ServiceID+"&plan_id="+samplebroker.PlanAsyncID, "")
	if status != http.StatusGatewayTimeout {
		t.Fatalf("deprovision: %d %s, want 504", status, body)
	}
	update := `{"service_id":"` + samplebroker.ServiceID + `"}`
	if status, _ := e.send(t, "PATCH", syncInstance, update); status != http.StatusBadRequest {
		t.Fatalf("update while the broker deprovisions: %d, want 400", status)
	}
	if orphans, _ := e.g.guard.St.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("orphans of a deprovision: %+v", orphans)
	}
	l, err := e.g.guard.St.Get(context.Background(), store.LockKey("b", "sw-1"))
	if err != nil || !l.Async {
		t.Fatalf("lock %+v, %v: want the async deprovision", l, err)
	}
	e.clock.Advance(l.Deadline.Sub(e.clock.Now()))
	if status, body := e.send(t, "PATCH", syncInstance, update); status == http.StatusBadRequest || e.broker.Count(samplebroker.EndpointUpdate) != 1 {
		t.Fatalf("update after the lock's deadline: %d %s, want it to reach the broker", status, body)
	}
}

// sendFlagged sends a platform request with accepts_incomplete=true.
func (e *syncEnv) sendFlagged(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	return e.sendAt(t, "2.15", method, path+"?accepts_incomplete=true", body)
}

// TestSyncWithinCannotServe: a bind the gateway cannot wait for gets 422
// AsyncRequired saying why, without a repeat: a broker asked to speak
// 2.13 (asynchronous bindings need 2.14), and a catalog without
// bindings_retrievable (the credentials would be out of reach).
func TestSyncWithinCannotServe(t *testing.T) {
	bindBody := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `","app_guid":"app-1"}`
	provision := func(t *testing.T, e *syncEnv) {
		if status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody); status != http.StatusCreated {
			t.Fatalf("provision: %d %s", status, body)
		}
	}
	t.Run("version", func(t *testing.T) {
		e := newSyncEnv(t, "50s", time.Second, nil)
		provision(t, e)
		if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointBind, Status: 422,
			Body: `{"error":"AsyncRequired","description":"binds are asynchronous"}`, Count: 1}); err != nil {
			t.Fatal(err)
		}
		status, body := e.sendAt(t, "2.13", "PUT", syncBinding, bindBody)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "needs X-Broker-API-Version 2.14") {
			t.Fatalf("bind: %d %s", status, body)
		}
		if got := fields(t, body)["error"]; got != "AsyncRequired" {
			t.Errorf("error %v, want AsyncRequired", got)
		}
		if calls := e.brokerCalls(syncBinding); len(calls) != 1 {
			t.Errorf("binding calls %q, want the bind alone", calls)
		}
	})
	t.Run("bindings_retrievable", func(t *testing.T) {
		e := newSyncEnv(t, "50s", time.Second, func(cat string) string {
			return strings.ReplaceAll(cat, `"bindings_retrievable":true`, `"bindings_retrievable":false`)
		})
		provision(t, e)
		status, body := e.send(t, "PUT", syncBinding, bindBody)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "bindings_retrievable false") {
			t.Fatalf("bind: %d %s", status, body)
		}
		valid(t, rules.Call{Endpoint: rules.Bind}, status, body)
		if calls := e.brokerCalls(syncBinding); len(calls) != 1 {
			t.Errorf("binding calls %q, want the bind alone", calls)
		}
	})
}

// TestSyncWithinOff: without sync_within the broker's 422 AsyncRequired
// reaches the platform.
func TestSyncWithinOff(t *testing.T) {
	e := newSyncEnv(t, "0s", time.Second, nil)
	status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody)
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "AsyncRequired") {
		t.Fatalf("provision: %d %s, want the broker's 422", status, body)
	}
}

// TestSyncWithinMeteredAndTraced: the gateway's own calls for a platform
// that cannot wait (the repeat, the polls, GET binding) are metered by
// endpoint like proxied calls, and are client spans under the platform
// call's server span.
func TestSyncWithinMeteredAndTraced(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	m, err := NewMetrics(p.Registerer, nil)
	if err != nil {
		t.Fatal(err)
	}
	sr, tp := traced(t)
	e := newSyncEnvWith(t, "50s", 1500*time.Millisecond, nil, Options{Metrics: m, Tracing: &Tracing{Provider: tp}})
	if status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody); status != http.StatusCreated {
		t.Fatalf("provision: %d %s", status, body)
	}
	text := scrape(t, p.MetricsHandler())
	for _, want := range []string{
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="provision",status_class="4xx"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="provision",status_class="2xx"} 1`,
		`osb_gateway_broker_duration_seconds_count{broker="b",endpoint="instance_last_operation",status_class="2xx"} 2`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	spans := endedSpans(t, sr, 6) // catalog; server; the provision, its repeat and two polls
	var server trace.SpanContext
	for _, s := range byKind(spans, trace.SpanKindServer) {
		server = s.SpanContext()
	}
	names := map[string]int{}
	for _, s := range byKind(spans, trace.SpanKindClient) {
		if s.Name() == "broker catalog" {
			continue
		}
		names[s.Name()]++
		if s.Parent().SpanID() != server.SpanID() {
			t.Errorf("span %q: parent %s, want the server span %s", s.Name(), s.Parent().SpanID(), server.SpanID())
		}
	}
	if diff := cmp.Diff(map[string]int{"broker provision": 2, "broker instance_last_operation": 2}, names); diff != "" {
		t.Errorf("client spans (-want +got):\n%s", diff)
	}
}

// TestSyncWithinRepeatAnswered: a repeat the broker answers with anything
// but 202 reaches the platform as the broker sent it.
func TestSyncWithinRepeatAnswered(t *testing.T) {
	e := newSyncEnv(t, "50s", time.Second, nil)
	for _, f := range []samplebroker.Fault{
		{Endpoint: samplebroker.EndpointProvision, Status: 422, Body: `{"error":"AsyncRequired","description":"async only"}`, Count: 1},
		{Endpoint: samplebroker.EndpointProvision, Status: 409, Body: `{"description":"exists with other attributes"}`, Count: 1},
	} {
		if err := e.broker.InjectFault(f); err != nil {
			t.Fatal(err)
		}
	}
	status, body := e.send(t, "PUT", syncInstance, asyncProvisionBody)
	if status != http.StatusConflict || body != `{"description":"exists with other attributes"}` {
		t.Fatalf("provision: %d %s, want the broker's 409", status, body)
	}
	if calls := e.brokerCalls(syncInstance); len(calls) != 2 || !strings.Contains(calls[1], "accepts_incomplete=true") {
		t.Errorf("calls %q, want the provision and its repeat", calls)
	}
	if waits := e.recordedWaits(); len(waits) != 0 {
		t.Errorf("waits %v, want no poll", waits)
	}
}

func TestNextWait(t *testing.T) {
	for _, tc := range []struct {
		name           string
		last, ra, want time.Duration
	}{
		{"first, no Retry-After", 0, 0, emulate.SyncPollFirst},
		{"doubles", time.Second, 0, 2 * time.Second},
		{"capped", 8 * time.Second, 0, emulate.SyncPollMax},
		{"Retry-After", 4 * time.Second, 3 * time.Second, 3 * time.Second},
		{"Retry-After capped", 0, time.Hour, emulate.SyncPollMax},
		{"Retry-After 0 is no Retry-After", time.Second, 0, 2 * time.Second},
		{"never below the floor", 0, time.Millisecond, emulate.SyncPollMin},
	} {
		if got := emulate.NextWait(tc.last, tc.ra, emulate.SyncPollMax); got != tc.want {
			t.Errorf("%s: nextWait(%s, %s) = %s, want %s", tc.name, tc.last, tc.ra, got, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		value string
		want  time.Duration
	}{
		{"", 0},
		{"7", 7 * time.Second},
		{"0", 0},
		{"-3", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		h := http.Header{}
		if tc.value != "" {
			h.Set("Retry-After", tc.value)
		}
		if got := emulate.RetryAfter(h, now); got != tc.want {
			t.Errorf("Retry-After %q: %s, want %s", tc.value, got, tc.want)
		}
	}
}
