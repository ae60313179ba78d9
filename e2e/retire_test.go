package e2e

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// retireYAML is the sample broker behind one tenant; %RETIRED% becomes the
// broker's retired line.
const retireYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
%RETIRED%
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: sample, services: {allow: [sample, sample-nobind]}}]
`

// swapGateway serves the current gateway of a reload sequence.
type swapGateway struct{ g atomic.Pointer[proxy.Gateway] }

func (s *swapGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.g.Load().ServeHTTP(w, r) }

// retireEnv is one gateway in front of the sample broker, on a bolt store,
// with every audit record kept, that a test reloads to retire the broker.
type retireEnv struct {
	*env
	clock  *osbtest.Clock
	sample *samplebroker.Broker
	server *httptest.Server
	st     store.Store
	recs   *records
	swap   *swapGateway
	vars   map[string]string
	osbc   osb.Client
	// restart: reload builds the next gateway as a new process would,
	// from nothing (no cached catalog).
	restart bool
}

func newRetireEnv(t *testing.T) *retireEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})
	srv := httptest.NewServer(sample)
	t.Cleanup(srv.Close)
	st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(t.TempDir(), "state.db")}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	re := &retireEnv{clock: clk, sample: sample, server: srv, st: st, recs: &records{}, swap: &swapGateway{},
		vars: map[string]string{"SAMPLE_URL": srv.URL, "SAMPLE_PASS": samplePass}}
	re.reload(t, "")
	re.env = &env{gateway: &tap{h: re.swap}}
	re.url = serveGateway(t, re.gateway)
	re.osbc = re.client(t, prodSample, osb.Version2_14(), prodUser, prodPass)
	return re
}

// reload builds the gateway of retireYAML with the broker's retired line
// (empty: not retired) over the running one, as a reload does.
func (re *retireEnv) reload(t *testing.T, retired string) {
	t.Helper()
	doc := strings.Replace(retireYAML, "%RETIRED%", retired, 1)
	cfg, err := config.Parse([]byte(doc), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := re.vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	prev := re.swap.g.Load()
	if re.restart {
		prev = nil // a new process: nothing cached
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: re.clock.Now, Store: re.st, Previous: prev,
		Audit: &proxy.AuditOptions{Writer: re.recs}, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	if old := re.swap.g.Swap(g); old != nil {
		old.Close(g)
	}
	t.Cleanup(func() {
		if re.swap.g.Load() == g {
			g.Close(nil)
		}
	})
}

// holdings provisions i-keep with binding b-keep and i-other, before the
// broker is retired.
func (re *retireEnv) holdings(t *testing.T) {
	t.Helper()
	c := re.osbc
	for _, id := range []string{"i-keep", "i-other"} {
		if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
			PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
			t.Fatalf("provision %s: %v", id, err)
		}
	}
	if _, err := c.Bind(&osb.BindRequest{InstanceID: "i-keep", BindingID: "b-keep", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Fatalf("bind: %v", err)
	}
}

// wantRetiredRefusal checks that err is the gateway's 422 saying the
// broker is retired, and that the broker was not called for it.
func (re *retireEnv) wantRetiredRefusal(t *testing.T, what string, err error, brokerBefore int64) {
	t.Helper()
	var he osb.HTTPStatusCodeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnprocessableEntity || he.Description == nil ||
		!strings.Contains(*he.Description, `broker "sample" is retired`) {
		t.Errorf("%s: %v, want 422 with a description saying the broker is retired", what, err)
	}
	if n := re.sample.Count(""); n != brokerBefore {
		t.Errorf("%s: the broker got %d calls, want none", what, n-brokerBefore)
	}
}

// TestRetiredBrokerForward: `retired: true` refuses provisions and binds
// (422, the broker never called, so nothing is orphaned) and forwards
// updates, unbinds and deprovisions, which the broker still answers.
func TestRetiredBrokerForward(t *testing.T) {
	re := newRetireEnv(t)
	re.holdings(t)
	re.reload(t, "    retired: true")
	c := re.osbc

	before := re.sample.Count("")
	_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-new", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	re.wantRetiredRefusal(t, "provision", err, before)
	_, err = c.Bind(&osb.BindRequest{InstanceID: "i-keep", BindingID: "b-new", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
	re.wantRetiredRefusal(t, "bind", err, before)

	if _, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i-keep", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		Parameters: map[string]any{"size": "medium"}}); err != nil {
		t.Errorf("update of a retired broker's instance: %v, want it forwarded", err)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: "i-keep", BindingID: "b-keep", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Errorf("unbind: %v", err)
	}
	re.wantStatus(t, http.StatusOK)
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-keep", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Errorf("deprovision: %v", err)
	}
	re.wantStatus(t, http.StatusOK)
	if got := re.sample.Count("") - before; got != 3 {
		t.Errorf("the broker got %d calls, want 3 (update, unbind, deprovision)", got)
	}
	if _, err := re.st.GetInstance(context.Background(), "sample", "i-keep"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inventory after the deprovision: %v, want the instance gone", err)
	}
}

// TestRetiredBrokerGone: `retired: {answer: gone}` with the broker down.
// The catalog stays served from the cache; provisions, binds and updates
// get 422; unbinds and deprovisions get 410 Gone from the gateway without
// calling the broker, the inventory drops what they delete, and each such
// answer is one audit record.
func TestRetiredBrokerGone(t *testing.T) {
	re := newRetireEnv(t)
	re.holdings(t)
	c := re.osbc
	if _, err := c.GetCatalog(); err != nil {
		t.Fatalf("catalog: %v", err)
	}
	re.reload(t, "    retired: {answer: gone}")
	re.server.Close() // the broker is gone
	before := re.sample.Count("")
	re.clock.Advance(24 * time.Hour) // past every catalog TTL

	if cat, err := c.GetCatalog(); err != nil || len(cat.Services) == 0 {
		t.Errorf("catalog of the retired broker, down: %v, want the cached one", err)
	}
	_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-new", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	re.wantRetiredRefusal(t, "provision", err, before)
	_, err = c.Bind(&osb.BindRequest{InstanceID: "i-keep", BindingID: "b-new", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
	re.wantRetiredRefusal(t, "bind", err, before)
	_, err = c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i-keep", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID})
	var he osb.HTTPStatusCodeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnprocessableEntity || he.Description == nil || !strings.Contains(*he.Description, "retired and gone") {
		t.Errorf("update: %v, want 422 saying the broker is retired and gone", err)
	}

	deletes := []struct {
		name string
		call func() error
	}{
		{"unbind b-keep", func() error {
			_, err := c.Unbind(&osb.UnbindRequest{InstanceID: "i-keep", BindingID: "b-keep", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
			return err
		}},
		{"deprovision i-keep", func() error {
			_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-keep", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
			return err
		}},
		{"deprovision i-other", func() error {
			_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-other", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
			return err
		}},
		{"deprovision i-never (unknown to the inventory)", func() error {
			_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-never", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID})
			return err
		}},
	}
	for _, d := range deletes {
		if err := d.call(); err != nil {
			t.Errorf("%s: %v, want the 410 the client takes as deleted", d.name, err)
		}
		re.wantStatus(t, http.StatusGone)
	}
	if n := re.sample.Count(""); n != before {
		t.Errorf("the broker got %d calls after it was retired, want none", n-before)
	}
	ctx := context.Background()
	if _, err := re.st.GetBinding(ctx, "sample", "i-keep", "b-keep"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inventory: binding b-keep %v, want dropped", err)
	}
	for _, id := range []string{"i-keep", "i-other"} {
		if _, err := re.st.GetInstance(ctx, "sample", id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("inventory: instance %s %v, want dropped", id, err)
		}
	}

	var gone []audit.Record
	var refused int
	for _, rec := range re.recs.list {
		switch {
		case rec.Outcome == proxy.OutcomeRetired:
			gone = append(gone, rec)
		case rec.Status == http.StatusUnprocessableEntity && rec.Error != nil && strings.Contains(rec.Error.Description, "retired"):
			refused++
		}
	}
	if len(gone) != len(deletes) || refused != 3 {
		t.Errorf("audit: %d records with outcome %q and %d retired refusals, want %d and 3", len(gone), proxy.OutcomeRetired, refused, len(deletes))
	}
	for _, rec := range gone {
		if rec.Status != http.StatusGone || rec.Broker != "sample" || (rec.Endpoint != "unbind" && rec.Endpoint != "deprovision") {
			t.Errorf("audit record %+v: want a 410 to an unbind or deprovision of sample", rec)
		}
	}
}

// TestRetiredGoneAfterRestart: a gateway started with the broker already
// retired and gone has nothing cached and can fetch nothing; it serves the
// catalog the state store keeps (the latest fetched, stale), so platforms
// keep their plans; the unbinds and deprovisions it answers itself need
// no catalog, even on a route whose service filter would need one for any
// other call.
func TestRetiredGoneAfterRestart(t *testing.T) {
	re := newRetireEnv(t)
	re.holdings(t)
	re.server.Close()
	re.restart = true
	re.reload(t, "    retired: {answer: gone}")
	c := re.osbc
	for i := range 2 { // the kept catalog, then the same from the cache
		if cat, err := c.GetCatalog(); err != nil || len(cat.Services) != 2 {
			t.Errorf("catalog %d of the retired broker after a restart: %+v %v, want the kept catalog's two services the route allows", i+1, cat, err)
		}
		re.wantStatus(t, http.StatusOK)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: "i-keep", BindingID: "b-keep", ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Errorf("unbind: %v", err)
	}
	re.wantStatus(t, http.StatusGone)
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-keep", AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Errorf("deprovision: %v", err)
	}
	re.wantStatus(t, http.StatusGone)
	if _, err := re.st.GetInstance(context.Background(), "sample", "i-keep"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inventory: i-keep %v, want dropped", err)
	}
}
