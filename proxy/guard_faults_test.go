package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
)

// Regression tests for the faults an operator's probe found, one per
// reproduction, named after the bug. The fault table (e2e) covers the
// whole failure model; these pin each fix down where it was made.

const faultYAML = `
admin: {address: "off"}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: ${TIMEOUT}
    orphan_mitigation: ${MODE}
    orphan_schedule: 10s,1m
    lock_granularity: ${GRANULARITY}
    validation:
      responses: ${RESPONSES}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

// faultSetup is one gateway in front of the sample broker, on an injected
// clock; zero fields take the defaults shown in newFaultEnv.
type faultSetup struct {
	mode, granularity, responses string
	timeout                      string // the broker's timeout; default 300ms
	st                           store.Store
	clock                        *osbtest.Clock
	// wrap, if set, wraps the sample broker's handler.
	wrap func(http.Handler) http.Handler
}

type faultEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *samplebroker.Broker
	clock  *osbtest.Clock
	st     store.Store
}

func newFaultEnv(t *testing.T, fs faultSetup) *faultEnv {
	t.Helper()
	if fs.mode == "" {
		fs.mode = "mitigate"
	}
	if fs.granularity == "" {
		fs.granularity = "binding"
	}
	if fs.responses == "" {
		fs.responses = "report"
	}
	if fs.timeout == "" {
		fs.timeout = "300ms"
	}
	if fs.clock == nil {
		fs.clock = osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Minute, Now: fs.clock.Now})
	var h http.Handler = broker
	if fs.wrap != nil {
		h = fs.wrap(broker)
	}
	bs := httptest.NewServer(h)
	t.Cleanup(bs.Close)
	vars := map[string]string{"URL": bs.URL, "MODE": fs.mode, "GRANULARITY": fs.granularity, "RESPONSES": fs.responses, "TIMEOUT": fs.timeout}
	cfg, err := config.Parse([]byte(faultYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if fs.st == nil {
		fs.st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, fs.clock.Now)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: fs.clock.Now, Store: fs.st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &faultEnv{g: g, gw: gw, broker: broker, clock: fs.clock, st: fs.st}
}

func (e *faultEnv) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	var in *strings.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	if in == nil {
		r, b := do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, "2.15", nil)
		return r.StatusCode, b
	}
	r, b := do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, "2.15", in)
	return r.StatusCode, b
}

func (e *faultEnv) locks(t *testing.T) []store.Lock {
	t.Helper()
	ls, err := e.st.List(context.Background(), store.ListFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

func (e *faultEnv) orphans(t *testing.T) []store.Orphan {
	t.Helper()
	os, err := e.st.ListOrphans(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return os
}

var syncProvisionBody = provisionBody(samplebroker.PlanSyncID, "")

// TestOrphanMitigationSparesAnInstanceARetryCreated: a provision that
// fails (500, a malformed 201, a 204) leaves an orphan queued for
// mitigation; the platform retries the same PUT and gets 201; the queued
// undo must not delete the instance the platform now holds. (It did: 4 of
// 4 retried instances were deleted.)
func TestOrphanMitigationSparesAnInstanceARetryCreated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault samplebroker.Fault
	}{
		{"500", samplebroker.Fault{Status: 500, Body: `{}`}},
		{"malformed 201", samplebroker.Fault{Status: 201, Body: `{not json`}},
		{"204", samplebroker.Fault{Status: 204, Body: ` `}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newFaultEnv(t, faultSetup{})
			f := tc.fault
			f.Endpoint, f.Count = samplebroker.EndpointProvision, 1
			_ = e.broker.InjectFault(f)
			e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody)
			if os := e.orphans(t); len(os) != 1 {
				t.Fatalf("orphans after the fault: %+v", os)
			}
			if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code != 201 {
				t.Fatalf("retry: %d %s", code, body)
			}
			e.clock.Advance(time.Hour)
			e.g.MitigateOrphans(context.Background())
			if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 0 {
				t.Errorf("the broker got %d deprovisions after the retry succeeded", n)
			}
			if code, _ := e.call(t, "GET", "/v2/service_instances/i1", ""); code != 200 {
				t.Errorf("GET the retried instance: %d, want 200", code)
			}
			if os := e.orphans(t); len(os) != 0 {
				t.Errorf("orphans left: %+v", os)
			}
		})
	}
}

// TestOrphanMitigationWaitsForTheInstanceLock: a mitigation never sends
// its DELETE while another operation holds the instance; it goes once the
// lock is free.
func TestOrphanMitigationWaitsForTheInstanceLock(t *testing.T) {
	e := newFaultEnv(t, faultSetup{})
	ctx := context.Background()
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	o := store.Orphan{ID: guard.OrphanID(store.KindDeprovision, "b", "i1", ""), Broker: "b", Kind: store.KindDeprovision, InstanceID: "i1",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanAsyncID, Reason: "test"}
	if err := e.st.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 0 {
		t.Fatalf("a DELETE went out while the provision held the instance (%d)", n)
	}
	// The operation ends; the claim of the skipped try lapses; the undo goes.
	e.clock.Advance(2 * time.Minute)
	if code, _ := e.call(t, "GET", "/v2/service_instances/i1/last_operation", ""); code != 200 {
		t.Fatalf("poll: %d", code)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Errorf("after the lock was free: %d deprovisions, want 1", n)
	}
}

// TestOrphanMitigatedOnceAcrossReplicas: two gateways on one redis-server
// with mitigate on; each orphan gets exactly one DELETE however the
// replicas' ticks interleave. (6 orphans made 11 DELETEs.)
func TestOrphanMitigatedOnceAcrossReplicas(t *testing.T) {
	r := storetest.StartRedis(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store {
		return openStore(t, store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock)
	}
	a := newFaultEnv(t, faultSetup{st: open(), clock: clock})
	b := newFaultEnv(t, faultSetup{st: open(), clock: clock})
	const n = 6
	_ = a.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 500, Body: `{}`, Count: n})
	for i := range n {
		if code, _ := a.call(t, "PUT", fmt.Sprintf("/v2/service_instances/i%d", i), syncProvisionBody); code != 500 {
			t.Fatalf("provision %d: %d", i, code)
		}
	}
	if os := a.orphans(t); len(os) != n {
		t.Fatalf("orphans: %d, want %d", len(os), n)
	}
	var wg sync.WaitGroup
	for _, g := range []*Gateway{a.g, b.g, a.g, b.g} {
		wg.Add(1)
		go func() { defer wg.Done(); g.MitigateOrphans(context.Background()) }()
	}
	wg.Wait()
	clock.Advance(2 * time.Minute) // any claim left by a replica that lost the lock race lapses
	a.g.MitigateOrphans(context.Background())
	b.g.MitigateOrphans(context.Background())
	// Each gateway has its own sample broker; the DELETEs of both count.
	sent := a.broker.Count(samplebroker.EndpointDeprovision) + b.broker.Count(samplebroker.EndpointDeprovision)
	if sent != n {
		t.Errorf("%d DELETEs for %d orphans", sent, n)
	}
	if os := a.orphans(t); len(os) != 0 {
		t.Errorf("orphans left: %+v", os)
	}
}

// cutShortBroker answers a provision of instance "i-cut" with a 201 whose
// body ends early: a Content-Length the body never reaches, or (chunked)
// no last chunk. Other calls reach next.
func cutShortBroker(chunked bool) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/service_instances/i-cut") {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			if !chunked {
				w.Header().Set("Content-Length", "100")
			}
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"dashboard_url":"http`))
			if f, ok := w.(http.Flusher); ok && chunked {
				f.Flush()
			}
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
		})
	}
}

// TestCutShortSuccessIsAnOrphanCandidate: a broker that sends a 201 header
// and part of the body, then closes, gives the platform a 502 — and, as the
// orphan-mitigation record says of a 201 with a malformed body, leaves an
// orphan candidate (none was recorded).
func TestCutShortSuccessIsAnOrphanCandidate(t *testing.T) {
	for _, chunked := range []bool{false, true} {
		t.Run(fmt.Sprintf("chunked=%t", chunked), func(t *testing.T) {
			e := newFaultEnv(t, faultSetup{mode: "report", wrap: cutShortBroker(chunked)})
			code, body := e.call(t, "PUT", "/v2/service_instances/i-cut", syncProvisionBody)
			if code != 502 || !strings.Contains(body, "cut short") {
				t.Errorf("platform got %d %s, want 502 naming the cut-short body", code, body)
			}
			os := e.orphans(t)
			if len(os) != 1 || os[0].InstanceID != "i-cut" || !strings.Contains(os[0].Reason, "malformed") {
				t.Errorf("orphans: %+v", os)
			}
			if ls := e.locks(t); len(ls) != 0 {
				t.Errorf("locks left: %+v", ls)
			}
		})
	}
}

// TestPlatformGoneBeforeSuccessIsAnOrphanCandidate: the platform hangs up
// while the broker works; the gateway lets the broker call finish (the
// lock is settled by what the broker did), and a 201 nobody received is an
// orphan candidate, as Cloud Controller's "client timeout" row says. (It
// was recorded nowhere, and the broker call was cut.)
func TestPlatformGoneBeforeSuccessIsAnOrphanCandidate(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	e := newFaultEnv(t, faultSetup{mode: "report", timeout: "30s", wrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPut {
				once.Do(func() { close(arrived) })
				<-release
			}
			next.ServeHTTP(w, r)
		})
	}})
	gone := make(chan struct{})
	var goneOnce sync.Once
	platform := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		go func() { <-r.Context().Done(); goneOnce.Do(func() { close(gone) }) }()
		e.g.ServeHTTP(w, r)
	}))
	defer platform.Close()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "PUT", platform.URL+"/t1/b/v2/service_instances/i1", strings.NewReader(syncProvisionBody))
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.15")
	errc := sendInBackground(req)
	<-arrived
	cancel()
	<-errc
	<-gone
	close(release)
	waitFor(t, func() bool { return len(e.orphans(t)) == 1 && len(e.locks(t)) == 0 })
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("provisions at the broker: %d", n)
	}
	if os := e.orphans(t); !strings.Contains(os[0].Reason, "went away") {
		t.Errorf("reason %q", os[0].Reason)
	}
}

// TestTimeoutHoldsTheInstanceUntilTheUndo: a provision the broker does not
// answer in time gets 504; a retry sent straight after must not reach a
// broker still busy with the first PUT (it did: two overlapping
// provisions). The instance stays held until the orphan decision is carried
// out: here the undo, due when hold_after_timeout passes.
func TestTimeoutHoldsTheInstanceUntilTheUndo(t *testing.T) {
	e := newFaultEnv(t, faultSetup{})
	_ = e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Hang: true, Count: 1})
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code != 504 {
		t.Fatalf("provision: %d %s", code, body)
	}
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code != 400 || !strings.Contains(body, InProgress) {
		t.Errorf("retry during the hold: %d %s", code, body)
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("provisions at the broker: %d, want 1", n)
	}
	e.g.MitigateOrphans(context.Background())
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 0 {
		t.Errorf("undo sent before the hold ended: %d", n)
	}
	e.clock.Advance(time.Second)
	e.g.MitigateOrphans(context.Background())
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Errorf("undo after the hold: %d deprovisions, want 1", n)
	}
	if ls, os := e.locks(t), e.orphans(t); len(ls) != 0 || len(os) != 0 {
		t.Errorf("left: locks %+v, orphans %+v", ls, os)
	}
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code != 201 {
		t.Errorf("provision after the undo: %d %s", code, body)
	}
}

// TestEnforcedPollStillSettlesTheLock: a last_operation answer that says
// "succeeded" but breaks another rule is refused (502) under responses:
// enforce — and still ends the operation, so the instance is not blocked
// for the lock's 7 days. (guard.finish handled the poll's own lock only.)
func TestEnforcedPollStillSettlesTheLock(t *testing.T) {
	e := newFaultEnv(t, faultSetup{responses: "enforce"})
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	_ = e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 200,
		Body: `{"state":"succeeded","description":5}`, Count: 1})
	if code, body := e.call(t, "GET", "/v2/service_instances/i1/last_operation", ""); code != 502 || !strings.Contains(body, "response.last_operation.description.type") {
		t.Fatalf("poll: %d %s", code, body)
	}
	if ls := e.locks(t); len(ls) != 0 {
		t.Errorf("lock kept after a terminal poll: %+v", ls)
	}
	if code, body := e.call(t, "PATCH", "/v2/service_instances/i1", updateBody); code == 400 {
		t.Errorf("update after the operation ended: %d %s", code, body)
	}
}

// TestGoneWhilePollingAProvisionBreaksTheRule: 410 to the poll of a
// provision is the broker's error (response.last_operation.gone); the rule
// never ran because the gateway did not tell the rules what it polled.
func TestGoneWhilePollingAProvisionBreaksTheRule(t *testing.T) {
	e := newFaultEnv(t, faultSetup{responses: "enforce"})
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	_ = e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 410, Body: `{}`, Count: 1})
	if code, body := e.call(t, "GET", "/v2/service_instances/i1/last_operation", ""); code != 502 || !strings.Contains(body, "response.last_operation.gone") {
		t.Errorf("poll: %d %s", code, body)
	}
	if ls := e.locks(t); len(ls) != 1 {
		t.Errorf("a 410 does not end a provision: locks %+v", ls)
	}
}

// TestTerminalPollWhileStoreDownReleasesLater: the store (Redis) is down
// when the platform polls and gets "succeeded"; the platform never polls
// again, so the gateway must release the lock itself once the store is
// back, not leave it for its deadline. (PATCH got 400 for 168 h.)
func TestTerminalPollWhileStoreDownReleasesLater(t *testing.T) {
	r := storetest.StartRedis(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := backend.Open(store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr},
		DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}}, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := newFaultEnv(t, faultSetup{st: st, clock: clock, timeout: "10s"})
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	r.Stop()
	clock.Advance(2 * time.Minute) // the broker finishes
	code, body := e.call(t, "GET", "/v2/service_instances/i1/last_operation", "")
	if code != 200 || !strings.Contains(body, "succeeded") {
		t.Fatalf("poll with the store down: %d %s", code, body)
	}
	r.Start()
	waitFor(t, func() bool {
		e.g.guard.Retry.RetryNow()
		ls, err := st.List(context.Background(), store.ListFilter{})
		return err == nil && len(ls) == 0
	})
	if code, body := e.call(t, "PATCH", "/v2/service_instances/i1", updateBody); code == 400 {
		t.Errorf("update once the store is back: %d %s", code, body)
	}
}

// TestBindingLocksFollowCloudController: with lock_granularity binding, an
// async bind in progress blocks that binding and the instance's
// deprovision, not another binding; an async provision blocks every bind.
// With lock_granularity instance, the second binding is blocked too.
func TestBindingLocksFollowCloudController(t *testing.T) {
	bind := func(e *faultEnv, id string) int {
		code, _ := e.call(t, "PUT", "/v2/service_instances/i1/service_bindings/"+id+"?accepts_incomplete=true", bindBody)
		return code
	}
	for _, tc := range []struct {
		granularity string
		otherBind   int
	}{{"binding", 202}, {"instance", 400}} {
		t.Run(tc.granularity, func(t *testing.T) {
			e := newFaultEnv(t, faultSetup{granularity: tc.granularity})
			if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", asyncProvision); code != 202 {
				t.Fatalf("async provision: %d %s", code, body)
			}
			if code := bind(e, "b0"); code != 400 {
				t.Errorf("bind during the provision: %d, want 400", code)
			}
			e.clock.Advance(2 * time.Minute)
			e.call(t, "GET", "/v2/service_instances/i1/last_operation", "")
			if code := bind(e, "b1"); code != 202 {
				t.Fatalf("bind b1: %d", code)
			}
			if code := bind(e, "b2"); code != tc.otherBind {
				t.Errorf("bind b2 while b1 is in progress: %d, want %d", code, tc.otherBind)
			}
			if code := bind(e, "b1"); code != 400 {
				t.Errorf("bind b1 again while it is in progress: %d, want 400", code)
			}
			if code, _ := e.call(t, "DELETE", "/v2/service_instances/i1"+deprovisionQ, ""); code != 400 {
				t.Errorf("deprovision while a bind is in progress: %d, want 400", code)
			}
			if code, _ := e.call(t, "PATCH", "/v2/service_instances/i1", updateBody); code != 400 {
				t.Errorf("update while a bind is in progress: %d, want 400 (Cloud Controller's UpdaterLock)", code)
			}
		})
	}
}
