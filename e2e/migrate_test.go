package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// migrateYAML is an old and a new sample broker behind one route;
// %MIGRATE% becomes the route's migrate_to (empty: none yet). Polls are
// not shielded (the tests move the brokers' clock between polls).
const migrateYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${OLD_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
    poll: {min_interval: -1s}
  - name: sample-v2
    url: ${NEW_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
    poll: {min_interval: -1s}
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: sample%MIGRATE%}]
`

// downable is a broker that can be taken down: while down, every
// connection is closed before an answer, as a crashed process's would be.
type downable struct {
	h    http.Handler
	down atomic.Bool
}

func (d *downable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if d.down.Load() {
		if hj, ok := w.(http.Hijacker); ok {
			if c, _, err := hj.Hijack(); err == nil {
				if tc, ok := c.(*net.TCPConn); ok {
					_ = tc.SetLinger(0) // a reset, not a clean close
				}
				c.Close()
				return
			}
		}
		panic(http.ErrAbortHandler)
	}
	d.h.ServeHTTP(w, r)
}

// migrateEnv is one gateway, on a bolt store, in front of an old and a
// new sample broker, that a test reloads to start the migration.
type migrateEnv struct {
	*env
	old, new *samplebroker.Broker
	newDown  *downable
	st       store.Store
	swap     *swapGateway
	vars     map[string]string
	osbc     osb.Client
	restart  bool // reload builds the next gateway as a new process would
}

func newMigrateEnv(t *testing.T) *migrateEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	opts := samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now}
	me := &migrateEnv{old: samplebroker.New(opts), new: samplebroker.New(opts), swap: &swapGateway{}}
	me.newDown = &downable{h: me.new}
	oldSrv, newSrv := httptest.NewServer(me.old), httptest.NewServer(me.newDown)
	t.Cleanup(oldSrv.Close)
	t.Cleanup(newSrv.Close)
	st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(t.TempDir(), "state.db")}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	me.st = st
	me.vars = map[string]string{"OLD_URL": oldSrv.URL, "NEW_URL": newSrv.URL, "SAMPLE_PASS": samplePass}
	me.env = &env{gateway: &tap{h: me.swap}, clock: clk}
	me.reload(t, "")
	me.url = serveGateway(t, me.gateway)
	me.osbc = me.client(t, prodSample, osb.Version2_14(), prodUser, prodPass)
	return me
}

// reload builds the gateway of migrateYAML with migrate_to set to
// migrateTo (empty: none) over the running one, as a reload does (or, with
// restart, as a new process over the same state file does).
func (me *migrateEnv) reload(t *testing.T, migrateTo string) {
	t.Helper()
	line := ""
	if migrateTo != "" {
		line = ", migrate_to: " + migrateTo
	}
	doc := strings.Replace(migrateYAML, "%MIGRATE%", line, 1)
	cfg, err := config.Parse([]byte(doc), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := me.vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	prev := me.swap.g.Load()
	if me.restart {
		prev = nil
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: me.clock.Now, Store: me.st, Previous: prev,
		BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if old := me.swap.g.Swap(g); old != nil {
		old.Close(g)
	}
	t.Cleanup(func() {
		if me.swap.g.Load() == g {
			g.Close(nil)
		}
	})
}

func (me *migrateEnv) provision(id, plan string) (*osb.ProvisionResponse, error) {
	return me.osbc.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		PlanID: plan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
}

func (me *migrateEnv) bind(inst, id string) error {
	_, err := me.osbc.Bind(&osb.BindRequest{InstanceID: inst, BindingID: id, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
	return err
}

func (me *migrateEnv) unbind(inst, id string) error {
	_, err := me.osbc.Unbind(&osb.UnbindRequest{InstanceID: inst, BindingID: id, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
	return err
}

func (me *migrateEnv) deprovision(id string) error {
	_, err := me.osbc.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID})
	return err
}

// holds checks which instances and bindings each broker holds.
func (me *migrateEnv) holds(t *testing.T, when string, old, new samplebroker.Holdings) {
	t.Helper()
	for _, b := range []struct {
		name      string
		got, want samplebroker.Holdings
	}{{"old", me.old.Holdings(), old}, {"new", me.new.Holdings(), new}} {
		if strings.Join(b.got.Instances, ",") != strings.Join(b.want.Instances, ",") ||
			strings.Join(b.got.Bindings, ",") != strings.Join(b.want.Bindings, ",") {
			t.Errorf("%s: the %s broker holds %+v, want %+v", when, b.name, b.got, b.want)
		}
	}
}

// TestMigrateInstanceByInstance: with routes[].migrate_to set, a lifecycle
// started before the switch (an async provision in flight, an instance
// with a binding) completes on the old broker; an instance provisioned
// after it lives its whole life on the new one, over a restart too; an id
// the inventory does not know, that is no provision, goes to the old
// broker; the platform's catalog stays the old broker's. Driven by the
// Kubernetes OSB client.
func TestMigrateInstanceByInstance(t *testing.T) {
	me := newMigrateEnv(t)
	var cat map[string]any
	if err := json.Unmarshal(me.old.Catalog(), &cat); err != nil {
		t.Fatal(err)
	}
	cat["services"].([]any)[0].(map[string]any)["description"] = "the new implementation"
	doc, _ := json.Marshal(cat)
	if err := me.new.SetCatalog(doc); err != nil { // same ids, another description
		t.Fatal(err)
	}

	if _, err := me.provision("i-before", samplebroker.PlanSyncID); err != nil {
		t.Fatalf("provision before the switch: %v", err)
	}
	if err := me.bind("i-before", "b-before"); err != nil {
		t.Fatalf("bind before the switch: %v", err)
	}
	res, err := me.provision("i-async", samplebroker.PlanAsyncID)
	if err != nil || !res.Async {
		t.Fatalf("async provision before the switch: %+v %v", res, err)
	}

	me.reload(t, "sample-v2")
	newBefore := me.new.Counts()
	answers, _ := me.poll(t, func() (*osb.LastOperationResponse, error) {
		return me.osbc.PollLastOperation(&osb.LastOperationRequest{InstanceID: "i-async", OperationKey: res.OperationKey})
	})
	if last := answers[len(answers)-1]; last.State != osb.StateSucceeded {
		t.Fatalf("the provision started before the switch ended %s", last.State)
	}
	if err := me.bind("i-before", "b-before-2"); err != nil {
		t.Errorf("bind on an old instance after the switch: %v", err)
	}

	if _, err := me.provision("i-after", samplebroker.PlanSyncID); err != nil {
		t.Fatalf("provision after the switch: %v", err)
	}
	if err := me.bind("i-after", "b-after"); err != nil {
		t.Fatalf("bind on a new instance: %v", err)
	}
	if _, err := me.osbc.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i-after", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		Parameters: map[string]any{"size": "medium"}}); err != nil {
		t.Errorf("update of a new instance: %v", err)
	}
	if _, err := me.osbc.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-after"}); err != nil {
		t.Errorf("fetch of a new instance: %v", err)
	}
	me.holds(t, "after the switch",
		samplebroker.Holdings{Instances: []string{"i-async", "i-before"}, Bindings: []string{"i-before/b-before", "i-before/b-before-2"}},
		samplebroker.Holdings{Instances: []string{"i-after"}, Bindings: []string{"i-after/b-after"}})
	if n := me.new.Count(samplebroker.EndpointInstanceLastOperation) - newBefore[samplebroker.EndpointInstanceLastOperation]; n != 0 {
		t.Errorf("the new broker got %d polls of the operation the old one runs", n)
	}

	got, err := me.osbc.GetCatalog()
	if err != nil || len(got.Services) == 0 || got.Services[0].Description == "the new implementation" {
		t.Errorf("catalog while migrating: %+v %v, want the old broker's", got, err)
	}

	// An id nobody holds, that is no provision, goes to the old broker.
	oldDeletes := me.old.Count(samplebroker.EndpointDeprovision)
	if err := me.deprovision("i-never"); err != nil {
		t.Errorf("deprovision of an unknown id: %v, want the 410 the client takes as deleted", err)
	}
	if me.old.Count(samplebroker.EndpointDeprovision) != oldDeletes+1 {
		t.Error("the deprovision of an unknown id did not reach the old broker")
	}

	me.restart = true // a new process over the same state file
	me.reload(t, "sample-v2")
	if err := me.unbind("i-after", "b-after"); err != nil {
		t.Errorf("unbind after a restart: %v", err)
	}
	if err := me.deprovision("i-after"); err != nil {
		t.Errorf("deprovision after a restart: %v", err)
	}
	if err := me.unbind("i-before", "b-before"); err != nil {
		t.Errorf("unbind of an old binding after a restart: %v", err)
	}
	me.holds(t, "at the end",
		samplebroker.Holdings{Instances: []string{"i-async", "i-before"}, Bindings: []string{"i-before/b-before-2"}},
		samplebroker.Holdings{})
	ctx := context.Background()
	if _, err := me.st.GetInstance(ctx, "sample-v2", "i-after"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inventory of the new broker after the deprovision: %v, want the record gone", err)
	}
	if _, err := me.st.GetInstance(ctx, "sample", "i-before"); err != nil {
		t.Errorf("inventory of the old broker: %v", err)
	}
}

// TestMigrateRefusesANewBrokerMissingIDs: a new broker whose catalog does
// not carry a plan id of the old one's gets no new instance: the provision
// is refused with a 422 naming the missing id, before any broker is
// called; once its catalog carries the id, provisions go to it.
func TestMigrateRefusesANewBrokerMissingIDs(t *testing.T) {
	me := newMigrateEnv(t)
	var cat map[string]any
	if err := json.Unmarshal(me.old.Catalog(), &cat); err != nil {
		t.Fatal(err)
	}
	svc := cat["services"].([]any)[0].(map[string]any)
	var plans []any
	for _, p := range svc["plans"].([]any) {
		if p.(map[string]any)["id"] != samplebroker.PlanAsyncID {
			plans = append(plans, p)
		}
	}
	svc["plans"] = plans
	doc, _ := json.Marshal(cat)
	if err := me.new.SetCatalog(doc); err != nil {
		t.Fatal(err)
	}
	me.restart = true
	me.reload(t, "sample-v2")
	before := me.old.Count(samplebroker.EndpointProvision) + me.new.Count(samplebroker.EndpointProvision)
	_, err := me.provision("i-1", samplebroker.PlanSyncID)
	var he osb.HTTPStatusCodeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnprocessableEntity || he.Description == nil ||
		!strings.Contains(*he.Description, samplebroker.PlanAsyncID) || !strings.Contains(*he.Description, `"sample-v2"`) {
		t.Fatalf("provision while the new catalog lacks a plan: %v, want 422 naming the plan id and the broker", err)
	}
	if after := me.old.Count(samplebroker.EndpointProvision) + me.new.Count(samplebroker.EndpointProvision); after != before {
		t.Errorf("the refused provision reached a broker (%d calls)", after-before)
	}

	me.new.ResetCatalog()
	me.reload(t, "sample-v2") // a new process: the catalog fetched again
	if _, err := me.provision("i-1", samplebroker.PlanSyncID); err != nil {
		t.Fatalf("provision once the new catalog carries every id: %v", err)
	}
	me.holds(t, "after the provision", samplebroker.Holdings{}, samplebroker.Holdings{Instances: []string{"i-1"}})
}

// TestFaultNewBrokerDownMidMigration (fault table): the new broker goes
// down while instances live on both. The calls for its instances fail
// with 502 and never reach the old broker (no split); the old broker's
// instances go on working; a provision goes to the new broker and fails
// there, so nothing is created on the old one behind the platform's back.
// Once the new broker is back, its instances answer again and the brokers
// hold exactly what the platform was told.
func TestFaultNewBrokerDownMidMigration(t *testing.T) {
	me := newMigrateEnv(t)
	if _, err := me.provision("i-old", samplebroker.PlanSyncID); err != nil {
		t.Fatal(err)
	}
	me.reload(t, "sample-v2")
	if _, err := me.provision("i-new", samplebroker.PlanSyncID); err != nil {
		t.Fatal(err)
	}

	me.newDown.down.Store(true)
	oldBefore := me.old.Count("")
	var he osb.HTTPStatusCodeError
	if err := me.bind("i-new", "b-1"); !errors.As(err, &he) || he.StatusCode != http.StatusBadGateway {
		t.Errorf("bind on the new broker's instance while it is down: %v, want 502", err)
	}
	if _, err := me.osbc.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-new"}); !errors.As(err, &he) || he.StatusCode != http.StatusBadGateway {
		t.Errorf("fetch while the new broker is down: %v, want 502", err)
	}
	if _, err := me.provision("i-down", samplebroker.PlanSyncID); !errors.As(err, &he) || he.StatusCode != http.StatusBadGateway {
		t.Errorf("provision while the new broker is down: %v, want 502", err)
	}
	if n := me.old.Count(""); n != oldBefore {
		t.Errorf("the old broker got %d calls meant for the new one", n-oldBefore)
	}
	if err := me.bind("i-old", "b-old"); err != nil {
		t.Errorf("bind on the old broker's instance while the new one is down: %v", err)
	}

	me.newDown.down.Store(false)
	me.clock.Advance(time.Hour) // past hold_after_timeout: the locks the resets left are gone
	// Cloud Controller's orphan mitigation of the failed provision: the
	// gateway's orphan queue names i-down at the new broker, so the DELETE
	// goes there (the provision may have created it), not to the old one.
	newDeletes := me.new.Count(samplebroker.EndpointDeprovision)
	if err := me.deprovision("i-down"); err != nil {
		t.Errorf("the platform's orphan mitigation of i-down: %v", err)
	}
	if me.new.Count(samplebroker.EndpointDeprovision) != newDeletes+1 {
		t.Error("the orphan mitigation of a provision that failed at the new broker did not reach it")
	}
	if n := me.old.Count(""); n != oldBefore+1 {
		t.Errorf("the old broker got %d calls, want the one bind of its own instance", n-oldBefore)
	}
	if os, err := me.st.ListOrphans(context.Background()); err != nil || len(os) != 1 || os[0].InstanceID != "i-new" {
		t.Errorf("orphan queue after the DELETE: %+v %v, want only the failed bind's on i-new", os, err)
	}
	if err := me.bind("i-new", "b-1"); err != nil {
		t.Errorf("bind once the new broker is back: %v", err)
	}
	me.holds(t, "once the new broker is back",
		samplebroker.Holdings{Instances: []string{"i-old"}, Bindings: []string{"i-old/b-old"}},
		samplebroker.Holdings{Instances: []string{"i-new"}, Bindings: []string{"i-new/b-1"}})
}
