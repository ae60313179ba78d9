package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	osbc "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
)

// driftT0 is the clock of the drift tests.
var driftT0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// driftEnv is a gateway in front of a real sample broker, on a bolt
// store, with its admin listener, metrics and log, and a real OSB client
// as the platform.
type driftEnv struct {
	broker   *samplebroker.Broker
	gateway  *Gateway
	st       store.Store
	clock    *osbtest.Clock
	reg      *prometheus.Registry
	admin    string // URL
	platform osbc.Client
	logs     *osbtest.Buffer
}

// newDriftEnv starts the broker, the gateway (catalog.on_drift onDrift;
// with secrets, parameters are kept sealed) and the admin listener.
func newDriftEnv(t *testing.T, onDrift string, secrets bool) *driftEnv {
	t.Helper()
	e := &driftEnv{clock: osbtest.NewClock(driftT0), reg: prometheus.NewRegistry(), logs: &osbtest.Buffer{}}
	e.broker = samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret"})
	bs := httptest.NewServer(e.broker)
	t.Cleanup(bs.Close)
	dir := t.TempDir()
	inv := ""
	if secrets {
		key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, seal.KeySize))
		if err := os.WriteFile(filepath.Join(dir, "keys"), []byte(key+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		inv = `inventory: {key_file: "` + filepath.Join(dir, "keys") + `"}`
	}
	yaml := `
admin: {address: "off", token: "` + testAdminToken + `"}
state: {backend: bolt, path: "` + filepath.Join(dir, "state.db") + `"}
catalog: {on_drift: ` + onDrift + `}
` + inv + `
brokers: [{name: b, url: "` + bs.URL + `", username: sample, password: sample-secret` + map[bool]string{true: `, inventory: {secrets: encrypted}`}[secrets] + `}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	if e.st, err = backend.Open(store.Config{Backend: store.BackendBolt, Path: cfg.State.Path}, e.clock.Now); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.st.Close() })
	m, err := NewMetrics(e.reg, e.clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(e.logs, nil))
	if e.gateway, err = New(cfg, Options{Logger: log, Now: e.clock.Now, Store: e.st, Metrics: m}); err != nil {
		t.Fatal(err)
	}
	gs := httptest.NewServer(e.gateway)
	t.Cleanup(gs.Close)
	a := newAdmin(NewSwitch(e.gateway), log, nil)
	as := httptest.NewServer(a)
	t.Cleanup(as.Close)
	e.admin = as.URL
	pc := osbc.DefaultClientConfiguration()
	pc.URL, pc.APIVersion, pc.TimeoutSeconds = gs.URL+"/t1/b", osbc.Version2_14(), 10
	pc.AuthConfig = &osbc.AuthConfig{BasicAuthConfig: &osbc.BasicAuthConfig{Username: "t1-user", Password: "t1-pass"}}
	if e.platform, err = osbc.NewClient(pc); err != nil {
		t.Fatal(err)
	}
	return e
}

// provision provisions instance id on the sample broker's sync plan
// through the gateway, as the platform.
func (e *driftEnv) provision(t *testing.T, id string, params map[string]any) {
	t.Helper()
	if _, err := e.platform.ProvisionInstance(&osbc.ProvisionRequest{InstanceID: id, ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: "org", SpaceGUID: "space", Parameters: params}); err != nil {
		t.Fatalf("provision %s: %v", id, err)
	}
}

// planIDs returns the plan ids of the catalog the platform gets.
func (e *driftEnv) planIDs(t *testing.T) []string {
	t.Helper()
	c, err := e.platform.GetCatalog()
	if err != nil {
		t.Fatalf("GET /v2/catalog: %v", err)
	}
	var ids []string
	for _, s := range c.Services {
		for _, p := range s.Plans {
			ids = append(ids, p.ID)
		}
	}
	return ids
}

// changeCatalog makes the broker advertise its catalog with edit applied
// to the decoded document.
func (e *driftEnv) changeCatalog(t *testing.T, edit func(services []any)) {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(e.broker.Catalog(), &doc); err != nil {
		t.Fatal(err)
	}
	edit(doc["services"].([]any))
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.broker.SetCatalog(b); err != nil {
		t.Fatal(err)
	}
}

// samplePlans returns the plans of the sample service in a decoded
// catalog, and sets them back with set.
func samplePlans(services []any) (plans []any, set func([]any)) {
	for _, s := range services {
		svc := s.(map[string]any)
		if svc["id"] == samplebroker.ServiceID {
			return svc["plans"].([]any), func(p []any) { svc["plans"] = p }
		}
	}
	panic("no sample service")
}

// removeSyncPlan drops the sync plan from the catalog.
func removeSyncPlan(services []any) {
	plans, set := samplePlans(services)
	var kept []any
	for _, p := range plans {
		if p.(map[string]any)["id"] != samplebroker.PlanSyncID {
			kept = append(kept, p)
		}
	}
	set(kept)
}

// refetch fetches the broker's catalog now, as the TTL's refresh would
// (POST /admin/brokers/b/catalog/refresh waits for it).
func (e *driftEnv) refetch(t *testing.T) {
	t.Helper()
	e.clock.Advance(time.Minute)
	if res, body := adminCall(t, "POST", e.admin+"/admin/brokers/b/catalog/refresh", testAdminToken); res.StatusCode != 200 {
		t.Fatalf("refresh: %d %s", res.StatusCode, body)
	}
}

// drift reads GET /admin/catalogs/drift and returns broker b's report.
func (e *driftEnv) drift(t *testing.T) catalog.DriftReport {
	t.Helper()
	var got struct {
		Brokers []catalog.DriftReport `json:"brokers"`
		Drift   int                   `json:"drift"`
	}
	getJSON(t, e.admin, "/admin/catalogs/drift", &got)
	if len(got.Brokers) != 1 || got.Brokers[0].Broker != "b" {
		t.Fatalf("drift report: %+v", got)
	}
	if got.Drift != len(got.Brokers[0].Items) {
		t.Errorf("drift = %d, want the %d items", got.Drift, len(got.Brokers[0].Items))
	}
	return got.Brokers[0]
}

// metric is osb_gateway_catalog_drift{broker="b",kind=kind}.
func (e *driftEnv) metric(t *testing.T, kind string) float64 {
	t.Helper()
	mfs, err := e.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "osb_gateway_catalog_drift" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["broker"] == "b" && labels["kind"] == kind {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no osb_gateway_catalog_drift{broker=b,kind=%s}", kind)
	return 0
}

// items are the report's items without their details.
func items(d catalog.DriftReport) []catalog.DriftItem {
	out := make([]catalog.DriftItem, len(d.Items))
	for i, it := range d.Items {
		it.Detail = ""
		out[i] = it
	}
	return out
}

// TestCatalogDriftPlanRemoved: the sync plan removed under a live instance
// shows in the drift report, the metric and one log line; the platform
// gets the new catalog (on_drift: serve) and keeps getting it; accepting
// clears the drift.
func TestCatalogDriftPlanRemoved(t *testing.T) {
	e := newDriftEnv(t, "serve", false)
	if n := e.metric(t, "plan_removed"); n != 0 {
		t.Fatalf("drift before any fetch: %v", n)
	}
	before := e.planIDs(t)
	e.provision(t, "i1", nil)
	if d := e.drift(t); d.AcceptedHash == "" || d.AcceptedHash != d.LatestHash || len(d.Items) != 0 || d.AcceptedBy != "gateway" {
		t.Fatalf("after the first fetch: %+v", d)
	}
	e.changeCatalog(t, removeSyncPlan)
	e.refetch(t)

	d := e.drift(t)
	want := []catalog.DriftItem{{Kind: "plan_removed", Service: samplebroker.ServiceName, Plan: samplebroker.PlanSyncName,
		OldID: samplebroker.PlanSyncID, LiveInstances: 1}}
	if diff := cmp.Diff(want, items(d)); diff != "" {
		t.Errorf("drift items (-want +got):\n%s", diff)
	}
	if d.Held || d.OnDrift != "serve" || d.LatestHash == d.AcceptedHash || !d.LatestAt.Equal(driftT0.Add(time.Minute)) {
		t.Errorf("report: %+v", d)
	}
	if n := e.metric(t, "plan_removed"); n != 1 {
		t.Errorf("osb_gateway_catalog_drift{kind=plan_removed} = %v, want 1", n)
	}
	if n := strings.Count(e.logs.String(), `msg="catalog drift"`); n != 1 {
		t.Errorf("%d drift log lines, want 1:\n%s", n, e.logs.String())
	}
	if got := e.planIDs(t); len(got) != len(before)-1 {
		t.Errorf("platform catalog plans %v, want the new catalog without %s (serve)", got, samplebroker.PlanSyncID)
	}
	e.refetch(t) // the same drift again: no second log line
	if n := strings.Count(e.logs.String(), `msg="catalog drift"`); n != 1 {
		t.Errorf("%d drift log lines after a second fetch, want 1", n)
	}

	res, body := adminCall(t, "POST", e.admin+"/admin/catalogs/b/accept", testAdminToken)
	if res.StatusCode != 200 {
		t.Fatalf("accept: %d %s", res.StatusCode, body)
	}
	d = e.drift(t)
	if len(d.Items) != 0 || d.AcceptedHash != d.LatestHash || !strings.Contains(d.AcceptedBy, "127.0.0.1") {
		t.Errorf("after accept: %+v", d)
	}
	if n := e.metric(t, "plan_removed"); n != 0 {
		t.Errorf("metric after accept = %v", n)
	}
	if !strings.Contains(e.logs.String(), `route="POST /admin/catalogs/{broker}/accept" broker=b who=127.0.0.1`) {
		t.Errorf("no admin line naming who accepted:\n%s", e.logs.String())
	}
	if res, body := adminCall(t, "POST", e.admin+"/admin/catalogs/b/accept", testAdminToken); res.StatusCode != 409 ||
		!strings.Contains(body, "nothing to accept") {
		t.Errorf("accept again: %d %s, want 409 nothing to accept", res.StatusCode, body)
	}
}

// TestCatalogDriftGUIDChanged: the sync plan's id changed under its name,
// with an instance on it, is drift; a plan added alone is not, and the
// catalog that adds it is accepted by the gateway itself.
func TestCatalogDriftGUIDChanged(t *testing.T) {
	e := newDriftEnv(t, "serve", false)
	e.provision(t, "i1", nil)
	e.changeCatalog(t, func(services []any) {
		plans, set := samplePlans(services)
		set(append(plans, map[string]any{"id": "extra-plan", "name": "extra", "description": "d", "free": true}))
	})
	e.refetch(t)
	if d := e.drift(t); len(d.Items) != 0 || d.AcceptedHash != d.LatestHash {
		t.Fatalf("a plan added: %+v, want accepted without drift", d)
	}
	e.changeCatalog(t, func(services []any) {
		plans, _ := samplePlans(services)
		for _, p := range plans {
			if p.(map[string]any)["id"] == samplebroker.PlanSyncID {
				p.(map[string]any)["id"] = "sync-v2"
			}
		}
	})
	e.refetch(t)
	want := []catalog.DriftItem{{Kind: "guid_changed", Service: samplebroker.ServiceName, Plan: samplebroker.PlanSyncName,
		OldID: samplebroker.PlanSyncID, NewID: "sync-v2", LiveInstances: 1}}
	if diff := cmp.Diff(want, items(e.drift(t))); diff != "" {
		t.Errorf("drift items (-want +got):\n%s", diff)
	}
	if n := e.metric(t, "guid_changed"); n != 1 {
		t.Errorf("osb_gateway_catalog_drift{kind=guid_changed} = %v, want 1", n)
	}
}

// TestCatalogDriftHold: with on_drift: hold, the platform keeps getting
// the accepted catalog after the broker removed a plan under a live
// instance, until an operator accepts the change; then it gets the new
// one.
func TestCatalogDriftHold(t *testing.T) {
	e := newDriftEnv(t, "hold", false)
	e.provision(t, "i1", nil)
	before := e.planIDs(t)
	e.changeCatalog(t, removeSyncPlan)
	e.refetch(t)
	d := e.drift(t)
	if !d.Held || len(d.Items) != 1 || d.Items[0].Kind != "plan_removed" {
		t.Fatalf("report: %+v, want held with plan_removed", d)
	}
	for range 2 {
		if got := e.planIDs(t); !cmp.Equal(got, before) {
			t.Fatalf("held: the platform got plans %v, want the accepted %v", got, before)
		}
		e.refetch(t)
	}
	if b := e.broker.Count("catalog"); b < 3 {
		t.Errorf("the broker was asked for its catalog %d times: the refreshes did not reach it", b)
	}
	if res, body := adminCall(t, "POST", e.admin+"/admin/catalogs/b/accept", testAdminToken); res.StatusCode != 200 {
		t.Fatalf("accept: %d %s", res.StatusCode, body)
	}
	after := e.planIDs(t)
	if len(after) != len(before)-1 {
		t.Errorf("after accept: plans %v, want the new catalog without %s", after, samplebroker.PlanSyncID)
	}
	if d := e.drift(t); d.Held || len(d.Items) != 0 {
		t.Errorf("after accept: %+v", d)
	}
}

// TestCatalogDriftSchema: a schema the stored parameters of a live
// instance no longer pass is drift where parameters are kept; without
// them, it is a note.
func TestCatalogDriftSchema(t *testing.T) {
	narrow := func(services []any) {
		plans, _ := samplePlans(services)
		for _, p := range plans {
			pm := p.(map[string]any)
			if pm["id"] != samplebroker.PlanSyncID {
				continue
			}
			ci := pm["schemas"].(map[string]any)["service_instance"].(map[string]any)
			size := ci["create"].(map[string]any)["parameters"].(map[string]any)["properties"].(map[string]any)["size"].(map[string]any)
			size["enum"] = []any{"medium", "large"}
		}
	}
	for _, secrets := range []bool{true, false} {
		t.Run(map[bool]string{true: "stored", false: "not stored"}[secrets], func(t *testing.T) {
			e := newDriftEnv(t, "serve", secrets)
			e.provision(t, "small", map[string]any{"size": "small"})
			e.provision(t, "large", map[string]any{"size": "large"})
			e.changeCatalog(t, narrow)
			e.refetch(t)
			d := e.drift(t)
			if !secrets {
				if len(d.Items) != 0 || len(d.Notes) != 1 || !strings.Contains(d.Notes[0], "not checked") {
					t.Errorf("without stored parameters: %+v, want a note and no items", d)
				}
				return
			}
			want := []catalog.DriftItem{{Kind: "schema_incompatible", Service: samplebroker.ServiceName, Plan: samplebroker.PlanSyncName,
				OldID: samplebroker.PlanSyncID, NewID: samplebroker.PlanSyncID, LiveInstances: 1}}
			if diff := cmp.Diff(want, items(d)); diff != "" {
				t.Errorf("drift items (-want +got):\n%s", diff)
			}
			if strings.Contains(e.logs.String(), `"small"`) || strings.Contains(d.Items[0].Detail, "small") {
				t.Error("a stored parameter's value reached the log or the report")
			}
		})
	}
}

// TestCatalogDriftStoreDown: a store that fails leaves the fetched catalog
// served, and says so once per fetch.
func TestCatalogDriftStoreDown(t *testing.T) {
	e := newDriftEnv(t, "hold", false)
	before := e.planIDs(t)
	e.changeCatalog(t, removeSyncPlan)
	e.st.Close()
	e.refetch(t)
	if got := e.planIDs(t); len(got) != len(before)-1 {
		t.Errorf("store down: plans %v, want the fetched catalog", got)
	}
	if !strings.Contains(e.logs.String(), "catalog drift not checked") {
		t.Errorf("no log line:\n%s", e.logs.String())
	}
	if _, err := e.gateway.CatalogDrift(context.Background()); err == nil {
		t.Error("CatalogDrift with the store closed: no error")
	}
}
