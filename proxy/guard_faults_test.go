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
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
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
    timeout: 300ms
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
	st                           store.Store
	clock                        *fakeClock
	// wrap, if set, wraps the sample broker's handler.
	wrap func(http.Handler) http.Handler
}

type faultEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *samplebroker.Broker
	clock  *fakeClock
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
	if fs.clock == nil {
		fs.clock = &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	}
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Minute, Now: fs.clock.now})
	var h http.Handler = broker
	if fs.wrap != nil {
		h = fs.wrap(broker)
	}
	bs := httptest.NewServer(h)
	t.Cleanup(bs.Close)
	vars := map[string]string{"URL": bs.URL, "MODE": fs.mode, "GRANULARITY": fs.granularity, "RESPONSES": fs.responses}
	cfg, err := config.Parse([]byte(faultYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if fs.st == nil {
		fs.st, _ = store.Open(store.Config{Backend: store.BackendMemory}, fs.clock.now)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: fs.clock.now, Store: fs.st})
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
			if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code == 201 {
				t.Fatalf("first provision: %d %s", code, body)
			}
			if os := e.orphans(t); len(os) != 1 {
				t.Fatalf("orphans after the fault: %+v", os)
			}
			if code, body := e.call(t, "PUT", "/v2/service_instances/i1", syncProvisionBody); code != 201 {
				t.Fatalf("retry: %d %s", code, body)
			}
			e.clock.add(time.Hour)
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
	o := store.Orphan{ID: orphanID(store.KindDeprovision, "b", "i1", ""), Broker: "b", Kind: store.KindDeprovision, InstanceID: "i1",
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanAsyncID, Reason: "test"}
	if err := e.st.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}
	e.g.MitigateOrphans(ctx)
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 0 {
		t.Fatalf("a DELETE went out while the provision held the instance (%d)", n)
	}
	// The operation ends; the claim of the skipped try lapses; the undo goes.
	e.clock.add(2 * time.Minute)
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
	clock := &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	open := func() store.Store {
		st, err := store.Open(store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock.now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
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
	clock.add(2 * time.Minute) // any claim left by a replica that lost the lock race lapses
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
