package proxy

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/rules"
)

// watchYAML is faultYAML's broker and tenant with state.watch_after.
const watchYAML = `
admin: {address: "off"}
state:
  watch_after: ${WATCH}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 10s
    orphan_mitigation: mitigate
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

// watchSetup is one gateway in front of the sample broker whose async
// operations take asyncDelay, on clock; watchAfter "" is
// state.watch_after's default. st, when set, is the store (a second
// replica shares the first one's).
type watchSetup struct {
	asyncDelay time.Duration
	watchAfter string
	clock      *osbtest.Clock
	st         store.Store
	broker     *samplebroker.Broker // when set, the replica's broker
	brokerURL  string
	metrics    *Metrics // nil: none
}

func newWatchEnv(t *testing.T, ws watchSetup) *faultEnv {
	t.Helper()
	if ws.clock == nil {
		ws.clock = osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if ws.broker == nil {
		ws.broker = samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: ws.asyncDelay, Now: ws.clock.Now})
		bs := httptest.NewServer(ws.broker)
		t.Cleanup(bs.Close)
		ws.brokerURL = bs.URL
	}
	if ws.watchAfter == "" {
		ws.watchAfter = config.DefaultReconcileAfter.String()
	}
	vars := map[string]string{"URL": ws.brokerURL, "WATCH": ws.watchAfter}
	cfg, err := config.Parse([]byte(watchYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if ws.st == nil {
		ws.st, _ = backend.Open(store.Config{Backend: store.BackendMemory}, ws.clock.Now)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: ws.clock.Now, Store: ws.st, Metrics: ws.metrics})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &faultEnv{g: g, gw: gw, broker: ws.broker, clock: ws.clock, st: ws.st}
}

const (
	watchInstance = "/v2/service_instances/i1"
	watchBinding  = watchInstance + "/service_bindings/b1"
	// unbindQ is Cloud Controller's orphan-mitigation unbind.
	unbindQ = "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
)

// polls is how many last_operation calls of both kinds reached the broker.
func (e *faultEnv) polls() int64 {
	return e.broker.Count(samplebroker.EndpointInstanceLastOperation) + e.broker.Count(samplebroker.EndpointBindingLastOperation)
}

// provisioned makes instance i1 (async plan) through the gateway and
// settles it with a platform's poll.
func (e *faultEnv) provisioned(t *testing.T) {
	t.Helper()
	if code, body := e.call(t, "PUT", watchInstance+"?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	e.clock.Advance(samplebroker.DefaultAsyncDelay)
	if code, body := e.call(t, "GET", watchInstance+"/last_operation", ""); code != 200 || !strings.Contains(body, "succeeded") {
		t.Fatalf("poll of the provision: %d %s", code, body)
	}
}

// lastOperation is the inventory's last operation of i1 (binding "": the
// instance's) and whether the record exists.
func (e *faultEnv) lastOperation(t *testing.T, bindingID string) (store.LastOperation, bool) {
	t.Helper()
	ctx := context.Background()
	if bindingID != "" {
		b, err := e.st.GetBinding(ctx, "b", "i1", bindingID)
		return b.LastOperation, err == nil
	}
	in, err := e.st.GetInstance(ctx, "b", "i1")
	return in.LastOperation, err == nil
}

// TestLostAsyncAnswerDoesNotBlockOrphanMitigation: a platform's async
// call got 202, but the platform never learned it (it reset the
// connection before reading the answer the gateway had written), so it
// never polls, and its orphan-mitigation DELETE got 400 "Another
// operation for this service instance is in progress." until the
// operation's deadline, although the broker had finished within a second.
// (Campaign: the lock of an async bind held 5 minutes on, every unbind
// refused.) Once the operation is older than state.watch_after (default
// 5m), the sweep polls the broker itself, records the outcome in the
// inventory and releases the lock; the platform's DELETE then goes
// through.
func TestLostAsyncAnswerDoesNotBlockOrphanMitigation(t *testing.T) {
	const watchAfter = config.DefaultReconcileAfter
	for _, tc := range []struct {
		name string
		// lost makes the call whose 202 the platform loses.
		path, method, body string
		kind, bindingID    string
		// om is the platform's orphan-mitigation DELETE and its statuses
		// once the lock is gone.
		om   string
		want []int
		// recorded: the inventory record after the watch, with the
		// operation succeeded; false: removed.
		recorded bool
	}{
		{"bind", watchBinding + "?accepts_incomplete=true", "PUT", bindBody, store.KindBind, "b1", watchBinding + unbindQ, []int{200}, true},
		{"provision", watchInstance + "?accepts_incomplete=true", "PUT", asyncProvision, store.KindProvision, "", watchInstance + deprovisionQ, []int{202}, true},
		{"deprovision", watchInstance + deprovisionQ, "DELETE", "", store.KindDeprovision, "", watchInstance + deprovisionQ, []int{410}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newWatchEnv(t, watchSetup{})
			if tc.name != "provision" {
				e.provisioned(t)
			}
			if code, body := e.call(t, tc.method, tc.path, tc.body); code != 202 {
				t.Fatalf("%s: %d %s, want 202", tc.name, code, body)
			}
			polled := e.polls()
			// The broker is done long before watch_after; no platform polls.
			e.clock.Advance(watchAfter - time.Second)
			e.g.SweepOperations(context.Background())
			if n := e.polls() - polled; n != 0 {
				t.Fatalf("the gateway polled %d times before watch_after", n)
			}
			if code, body := e.call(t, "DELETE", tc.om, ""); code != 400 || !strings.Contains(body, InProgress) {
				t.Fatalf("orphan mitigation while the operation is held: %d %s, want 400", code, body)
			}
			e.clock.Advance(2 * time.Second)
			e.g.SweepOperations(context.Background())
			if n := e.polls() - polled; n != 1 {
				t.Errorf("the gateway polled %d times past watch_after, want 1", n)
			}
			if ls := e.locks(t); len(ls) != 0 {
				t.Fatalf("locks after the gateway's poll: %+v", ls)
			}
			op, ok := e.lastOperation(t, tc.bindingID)
			switch {
			case ok != tc.recorded:
				t.Errorf("inventory record exists: %v, want %v (%+v)", ok, tc.recorded, op)
			case ok && (op.State != store.StateSucceeded || op.Kind != tc.kind):
				t.Errorf("inventory last operation %+v, want the %s succeeded", op, tc.kind)
			}
			code, body := e.call(t, "DELETE", tc.om, "")
			if !slices.Contains(tc.want, code) {
				t.Errorf("orphan mitigation after the gateway's poll: %d %s, want %v", code, body, tc.want)
			}
		})
	}
}

// TestWatchLeavesAnOperationInProgress: an operation the broker says is in
// progress, or whose poll fails (500), keeps its lock; the gateway polls
// it again once per watch_after, not at every sweep, and settles it when
// the broker says it ended.
func TestWatchLeavesAnOperationInProgress(t *testing.T) {
	m, err := registeredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	e := newWatchEnv(t, watchSetup{asyncDelay: 5 * time.Minute, watchAfter: "2m", metrics: m})
	if code, body := e.call(t, "PUT", watchInstance+"?accepts_incomplete=true", asyncProvision); code != 202 {
		t.Fatalf("async provision: %d %s", code, body)
	}
	held := func(when string) {
		t.Helper()
		if ls := e.locks(t); len(ls) != 1 {
			t.Fatalf("%s: locks %+v, want the provision's", when, ls)
		}
		if code, _ := e.call(t, "DELETE", watchInstance+deprovisionQ, ""); code != 400 {
			t.Fatalf("%s: deprovision %d, want 400", when, code)
		}
	}
	sweep := func(d time.Duration, wantPolls int64, when string) {
		t.Helper()
		e.clock.Advance(d)
		e.g.SweepOperations(context.Background())
		if n := e.polls(); n != wantPolls {
			t.Fatalf("%s: %d polls, want %d", when, n, wantPolls)
		}
	}
	if err := e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 500, Count: 1}); err != nil {
		t.Fatal(err)
	}
	sweep(2*time.Minute+time.Second, 1, "past watch_after, the broker fails")
	held("after a 500")
	sweep(time.Minute, 1, "within watch_after of the last poll")
	sweep(time.Minute, 2, "watch_after after the last poll, the broker works on")
	held("in progress")
	sweep(2*time.Minute, 3, "the broker is done")
	if ls := e.locks(t); len(ls) != 0 {
		t.Fatalf("locks: %+v", ls)
	}
	if op, ok := e.lastOperation(t, ""); !ok || op.State != store.StateSucceeded {
		t.Errorf("inventory: %+v (recorded: %v), want the provision succeeded", op, ok)
	}
	if n := seriesValue(m, "osb_gateway_operations_settled_by_gateway_total", map[string]string{"broker": "b", "state": rules.PollSucceeded}); n != 1 {
		t.Errorf("osb_gateway_operations_settled_by_gateway_total{state=succeeded}: %v, want 1", n)
	}
}

// TestWatchAfterAPlatformSettled: the watch does nothing harmful when a
// platform's poll, or another replica's watch, settled the operation first,
// even when that happens between the watch's poll and its settlement.
func TestWatchAfterAPlatformSettled(t *testing.T) {
	ctx := context.Background()
	t.Run("the platform polled", func(t *testing.T) {
		e := newWatchEnv(t, watchSetup{})
		e.provisioned(t)
		polled := e.polls()
		e.clock.Advance(config.DefaultReconcileAfter + time.Second)
		e.g.SweepOperations(ctx)
		if n := e.polls() - polled; n != 0 {
			t.Errorf("the gateway polled a settled operation %d times", n)
		}
	})
	t.Run("settled between the poll and the settlement", func(t *testing.T) {
		e := newWatchEnv(t, watchSetup{})
		if code, body := e.call(t, "PUT", watchInstance+"?accepts_incomplete=true", asyncProvision); code != 202 {
			t.Fatalf("async provision: %d %s", code, body)
		}
		stale := e.locks(t)[0]
		e.clock.Advance(samplebroker.DefaultAsyncDelay)
		if code, _ := e.call(t, "GET", watchInstance+"/last_operation", ""); code != 200 {
			t.Fatalf("poll: %d", code)
		}
		if code, body := e.call(t, "PATCH", watchInstance+"?accepts_incomplete=true", updateBody); code != 202 {
			t.Fatalf("async update: %d %s", code, body)
		}
		update := e.locks(t)[0]
		// The watch polled the provision before the platform settled it.
		e.g.guard.SettleOwn(ctx, e.g.upstreams["b"], stale, rules.Answer{Status: 200, State: rules.PollSucceeded}, false)
		if ls := e.locks(t); len(ls) != 1 || ls[0].Owner != update.Owner {
			t.Fatalf("locks after a stale settlement: %+v, want the update's", ls)
		}
		if op, _ := e.lastOperation(t, ""); op.Kind != store.KindUpdate || op.State != store.StateInProgress {
			t.Errorf("inventory after a stale settlement: %+v, want the update in progress", op)
		}
	})
	t.Run("another replica's watch", func(t *testing.T) {
		a := newWatchEnv(t, watchSetup{})
		a.provisioned(t)
		b := newWatchEnv(t, watchSetup{clock: a.clock, st: a.st, broker: a.broker, brokerURL: brokerURLOf(t, a)})
		if code, body := a.call(t, "PUT", watchBinding+"?accepts_incomplete=true", bindBody); code != 202 {
			t.Fatalf("async bind: %d %s", code, body)
		}
		stale := a.locks(t)[0]
		a.clock.Advance(config.DefaultReconcileAfter + time.Second)
		b.g.SweepOperations(ctx)
		polled := a.polls()
		a.g.SweepOperations(ctx)
		a.g.guard.SettleOwn(ctx, a.g.upstreams["b"], stale, rules.Answer{Status: 200, State: rules.PollSucceeded}, false)
		if n := a.polls() - polled; n != 0 {
			t.Errorf("replica a polled %d times after b settled the bind", n)
		}
		if ls := a.locks(t); len(ls) != 0 {
			t.Fatalf("locks: %+v", ls)
		}
		if op, ok := a.lastOperation(t, "b1"); !ok || op.Kind != store.KindBind || op.State != store.StateSucceeded {
			t.Errorf("inventory: %+v (recorded: %v), want the bind succeeded", op, ok)
		}
		if code, body := a.call(t, "DELETE", watchBinding+unbindQ, ""); code != 200 {
			t.Errorf("unbind: %d %s", code, body)
		}
	})
}

// brokerURLOf is the sample broker's URL e's gateway reaches.
func brokerURLOf(t *testing.T, e *faultEnv) string {
	t.Helper()
	return e.g.upstreams["b"].Target.String()
}

// TestWatchedDue: which operations a sweep polls, and in which order.
func TestWatchedDue(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const after = 5 * time.Minute
	lock := func(key string, started time.Time) store.Lock {
		return store.Lock{Key: key, Owner: "o-" + key, Async: true, Started: started}
	}
	shim := lock("shim", t0)
	shim.Shim.State = store.StateInProgress
	sync := lock("sync", t0)
	sync.Async = false
	ls := []store.Lock{lock("young", t0.Add(time.Minute)), shim, sync, lock("b", t0.Add(time.Second)), lock("a", t0), lock("c", t0.Add(2*time.Second))}
	keys := func(ls []store.Lock) []string {
		var ks []string
		for _, l := range ls {
			ks = append(ks, l.Key)
		}
		return ks
	}
	var w guard.Watched
	now := t0.Add(after + 2*time.Second)
	if got, want := keys(w.Due(ls, now, after, after, 2)), []string{"a", "b"}; !slices.Equal(got, want) {
		t.Errorf("first sweep: %v, want the oldest %v", got, want)
	}
	now = now.Add(time.Minute)
	if got, want := keys(w.Due(ls, now, after, after, 2)), []string{"c", "young"}; !slices.Equal(got, want) {
		t.Errorf("second sweep: %v, want those not polled yet %v", got, want)
	}
	now = now.Add(after)
	if got, want := keys(w.Due(ls, now, after, after, 3)), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("after watch_after: %v, want the least recently polled %v", got, want)
	}
	if got := keys(w.Due(ls[:1], now.Add(after), after, after, 3)); !slices.Equal(got, []string{"young"}) || len(w.Last) != 1 {
		t.Errorf("with one lock left: %v, remembered %d, want [young] and 1", got, len(w.Last))
	}
}
