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
		ws.watchAfter = config.DefaultWatchAfter.String()
	}
	vars := map[string]string{"URL": ws.brokerURL, "WATCH": ws.watchAfter}
	cfg, err := config.Parse([]byte(watchYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if ws.st == nil {
		ws.st, _ = store.Open(store.Config{Backend: store.BackendMemory}, ws.clock.Now)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: ws.clock.Now, Store: ws.st})
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
	const watchAfter = config.DefaultWatchAfter
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
