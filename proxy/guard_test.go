package proxy

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/rules"
)

const guardYAML = `
admin: {address: "off"}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 500ms
    concurrency_error: ${CONCURRENCY}
    allow_delete_during_create: ${ALLOW_DELETE}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

type guardEnv struct {
	gw     *httptest.Server
	g      *Gateway
	broker *samplebroker.Broker
	clock  *osbtest.Clock
}

func newGuardEnv(t *testing.T, open func(now func() time.Time) store.Store, concurrency, allowDelete string) *guardEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var st store.Store
	if open != nil {
		st = open(clock.Now)
	}
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Minute, Now: clock.Now})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	env := map[string]string{"URL": bs.URL, "CONCURRENCY": concurrency, "ALLOW_DELETE": allowDelete}
	cfg, err := config.Parse([]byte(guardYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &guardEnv{gw: gw, g: g, broker: broker, clock: clock}
}

func (e *guardEnv) call(t *testing.T, method, path, version, body string) (int, string) {
	t.Helper()
	var in *strings.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	var res, got = func() (int, string) {
		if in == nil {
			r, b := do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, version, nil)
			return r.StatusCode, b
		}
		r, b := do(t, method, e.gw.URL+"/t1/b"+path, t1User, t1Pass, version, in)
		return r.StatusCode, b
	}()
	return res, got
}

var (
	asyncProvision = provisionBody(samplebroker.PlanAsyncID, "")
	updateBody     = fmt.Sprintf(`{"service_id":%q,"parameters":{"x":1}}`, samplebroker.ServiceID)
	bindBody       = fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app"}}`, samplebroker.ServiceID, samplebroker.PlanAsyncID)
	deprovisionQ   = "?accepts_incomplete=true&service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
)

// TestGuardBlocksDuringAsyncProvision: provision async → update 400 →
// poll to succeeded → update goes through.
func TestGuardBlocksDuringAsyncProvision(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", asyncProvision); code != 202 {
		t.Fatalf("provision: %d %s", code, body)
	}
	updates := e.broker.Count(samplebroker.EndpointUpdate)
	for _, tc := range []struct{ name, method, path, body string }{
		{"update", "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", updateBody},
		{"bind", "PUT", "/v2/service_instances/i1/service_bindings/b1?accepts_incomplete=true", bindBody},
		{"deprovision", "DELETE", "/v2/service_instances/i1" + deprovisionQ, ""},
	} {
		code, body := e.call(t, tc.method, tc.path, "2.15", tc.body)
		if code != 400 || body != `{"description":"Another operation for this service instance is in progress."}`+"\n" {
			t.Errorf("%s during the provision: %d %s", tc.name, code, body)
		}
	}
	if e.broker.Count(samplebroker.EndpointUpdate) != updates {
		t.Error("a blocked update reached the broker")
	}
	// Reads are never blocked.
	if code, _ := e.call(t, "GET", "/v2/service_instances/i1/last_operation", "2.15", ""); code != 200 {
		t.Errorf("last_operation: %d", code)
	}
	if code, _ := e.call(t, "GET", "/v2/service_instances/i1", "2.15", ""); code == 400 {
		t.Errorf("GET instance blocked")
	}
	// Another instance is not blocked.
	if code, body := e.call(t, "PUT", "/v2/service_instances/i2?accepts_incomplete=true", "2.15", asyncProvision); code != 202 {
		t.Errorf("other instance: %d %s", code, body)
	}

	e.clock.Advance(2 * time.Minute) // the broker's operation completes
	if code, body := e.call(t, "GET", "/v2/service_instances/i1/last_operation", "2.15", ""); code != 200 || !strings.Contains(body, "succeeded") {
		t.Fatalf("poll: %d %s", code, body)
	}
	if code, body := e.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", updateBody); code != 202 {
		t.Errorf("update after the provision: %d %s", code, body)
	}
}

func TestGuardConcurrencyErrorSpec(t *testing.T) {
	e := newGuardEnv(t, nil, "spec", "false")
	e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", asyncProvision)
	code, body := e.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", updateBody)
	if code != 422 || !strings.Contains(body, `"error":"ConcurrencyError"`) {
		t.Errorf("2.15: %d %s", code, body)
	}
	if code, _ := e.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", "2.13", updateBody); code != 400 {
		t.Errorf("2.13 gets the 400: %d", code)
	}
}

func TestGuardAllowDeleteDuringCreate(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "true")
	e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", asyncProvision)
	before := e.broker.Count(samplebroker.EndpointDeprovision)
	e.call(t, "DELETE", "/v2/service_instances/i1"+deprovisionQ, "2.15", "")
	if e.broker.Count(samplebroker.EndpointDeprovision) != before+1 {
		t.Error("the deprovision cancelling a create did not reach the broker")
	}
	if code, _ := e.call(t, "PATCH", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", updateBody); code != 400 {
		t.Errorf("an update is still blocked: %d", code)
	}
}

// TestGuardReleasePaths: whatever ends a call that got no 202, the lock
// goes with it — but for a broker timeout, after which the broker may
// still be working: the lock is held for hold_after_timeout (the broker's
// timeout, 500ms here), then expires.
func TestGuardReleasePaths(t *testing.T) {
	syncProvision := provisionBody(samplebroker.PlanSyncID, "")
	for _, tc := range []struct {
		name  string
		fault *samplebroker.Fault
		want  int
		held  bool
	}{
		{"success", nil, 201, false},
		{"broker error", &samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 500, Body: `{}`, Count: 1}, 500, false},
		{"broker timeout", &samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Hang: true, Count: 1}, 504, true},
		{"garbage", &samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: 201, Body: `{`, Count: 1}, 201, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newGuardEnv(t, nil, "blocking", "false")
			if tc.fault != nil {
				if err := e.broker.InjectFault(*tc.fault); err != nil {
					t.Fatal(err)
				}
			}
			if code, body := e.call(t, "PUT", "/v2/service_instances/i1", "2.15", syncProvision); code != tc.want {
				t.Fatalf("provision: %d %s", code, body)
			}
			if tc.held {
				locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{})
				if len(locks) != 1 || !locks[0].Deadline.Equal(e.clock.Now().Add(500*time.Millisecond)) {
					t.Fatalf("after a timeout, want the lock held for 500ms, got %+v", locks)
				}
				if code, _ := e.call(t, "PUT", "/v2/service_instances/i1", "2.15", syncProvision); code != 400 {
					t.Errorf("a retry during the hold: %d, want 400", code)
				}
				e.clock.Advance(time.Second)
				e.g.SweepOperations(context.Background())
			}
			if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
				t.Errorf("lock left behind: %+v", locks)
			}
		})
	}
}

func TestGuardDeadline(t *testing.T) {
	e := newGuardEnv(t, nil, "blocking", "false")
	e.broker.InjectFault(samplebroker.Fault{}) //nolint:errcheck // no-op fault keeps the call shape
	e.broker.ClearFaults()
	e.call(t, "PUT", "/v2/service_instances/i1?accepts_incomplete=true", "2.15", asyncProvision)
	locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{})
	if len(locks) != 1 || !locks[0].Async || locks[0].Operation == "" {
		t.Fatalf("async lock: %+v", locks)
	}
	// The async plan's maximum_polling_duration (600s) bounds the lock.
	if want := e.clock.Now().Add(samplebroker.MaxPollingDuration * time.Second); !locks[0].Deadline.Equal(want) {
		t.Errorf("deadline %v, want %v", locks[0].Deadline, want)
	}
	e.clock.Advance(601 * time.Second)
	e.g.SweepOperations(context.Background())
	if locks, _ := e.g.guard.St.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
		t.Errorf("the sweeper left %+v", locks)
	}
}

// TestGuardRedisStoppedAndRestarted: with the store gone, mutating calls
// fail closed with 503 and reads flow; when it is back, service resumes.
func TestGuardRedisStoppedAndRestarted(t *testing.T) {
	r := storetest.StartRedis(t)
	e := newGuardEnv(t, func(now func() time.Time) store.Store {
		st, err := backend.Open(store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr},
			DialTimeout: 5 * time.Second, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}}, now)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}, "blocking", "false")
	syncProvision := provisionBody(samplebroker.PlanSyncID, "")
	if code, body := e.call(t, "PUT", "/v2/service_instances/i1", "2.15", syncProvision); code != 201 {
		t.Fatalf("with redis: %d %s", code, body)
	}
	r.Stop()
	code, body := e.call(t, "PUT", "/v2/service_instances/i2", "2.15", syncProvision)
	if code != 503 || !strings.Contains(body, "operation state is unavailable") {
		t.Errorf("redis down, provision: %d %s", code, body)
	}
	if code, _ := e.call(t, "GET", "/v2/service_instances/i1", "2.15", ""); code != 200 {
		t.Errorf("redis down, GET instance: %d", code)
	}
	r.Start()
	waitFor(t, func() bool {
		code, _ := e.call(t, "PUT", "/v2/service_instances/i3", "2.15", syncProvision)
		return code == 201
	})
}

// TestLockKindsAreStoreKinds: the guard records rules.LockKind as a lock's
// Kind, and reads it back with rules.LockedBy, so the rules' kinds are
// exactly the store's.
func TestLockKindsAreStoreKinds(t *testing.T) {
	for e, want := range map[rules.Endpoint]string{
		rules.Provision: store.KindProvision, rules.Update: store.KindUpdate, rules.Deprovision: store.KindDeprovision,
		rules.Bind: store.KindBind, rules.Unbind: store.KindUnbind,
	} {
		if kind, _ := rules.LockKind(e); kind != want {
			t.Errorf("rules.LockKind(%s) = %q, the store's kind is %q", e, kind, want)
		}
	}
}
