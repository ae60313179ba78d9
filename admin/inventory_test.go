package admin

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// adminMarker is the plaintext of every secret the inventory tests seal:
// it must never show in an admin answer, a log line or a metric.
const adminMarker = "MARKER-admin-5b1e-hunter2"

// inventoryT0 is the clock of the inventory tests.
var inventoryT0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// sealMarker seals {"password": adminMarker} as the inventory would.
func sealMarker(t *testing.T, what string) []byte {
	t.Helper()
	k, err := seal.New(bytes.Repeat([]byte{9}, seal.KeySize))
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Seal([]byte(`{"password":"`+adminMarker+`"}`), []byte(what))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// seededInventory is the inventory of the admin tests, on the memory
// store: instances i1 (tenant t1, sealed parameters), i2 (t2), i3 (t1) of
// broker b; bindings b/i1/x1 (sealed parameters and credentials, expiring
// in an hour), b/i1/x2 (no expires_at), b/i2/x1 (expiring in 30 days),
// b/i9/x1 (of an instance never recorded, expired an hour ago), and
// gone/i1/x1 of a broker no longer configured, expiring in a minute.
func seededInventory(t *testing.T) (store.Store, map[string]store.Instance, map[string]store.Binding) {
	t.Helper()
	ctx := context.Background()
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, osbtest.NewClock(inventoryT0).Now)
	ins := map[string]store.Instance{}
	for _, in := range []store.Instance{
		{Broker: "b", InstanceID: "i1", Tenant: "t1", ServiceID: "svc", PlanID: "plan",
			Context:          json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"}`),
			OrganizationGUID: "org-1", SpaceGUID: "space-1", DashboardURL: "https://dash.example.com/i1",
			SealedParameters: sealMarker(t, "parameters\x00b\x00i1"),
			LastOperation:    store.LastOperation{Kind: store.KindProvision, State: store.StateSucceeded, Status: 201}},
		{Broker: "b", InstanceID: "i2", Tenant: "t2", ServiceID: "svc", PlanID: "plan"},
		{Broker: "b", InstanceID: "i3", Tenant: "t1", ServiceID: "svc", PlanID: "plan"},
	} {
		got, err := st.PutInstance(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		ins[in.InstanceID] = got
	}
	bds := map[string]store.Binding{}
	for _, bd := range []store.Binding{
		{Broker: "b", InstanceID: "i1", BindingID: "x1", Tenant: "t1", AppGUID: "app-1",
			SealedParameters:  sealMarker(t, "parameters\x00b\x00i1\x00x1"),
			SealedCredentials: sealMarker(t, "credentials\x00b\x00i1\x00x1"),
			ExpiresAt:         inventoryT0.Add(time.Hour)},
		{Broker: "b", InstanceID: "i1", BindingID: "x2", Tenant: "t1"},
		{Broker: "b", InstanceID: "i2", BindingID: "x1", Tenant: "t2", ExpiresAt: inventoryT0.Add(30 * 24 * time.Hour)},
		{Broker: "b", InstanceID: "i9", BindingID: "x1", Tenant: "t1", ExpiresAt: inventoryT0.Add(-time.Hour)},
		{Broker: "gone", InstanceID: "i1", BindingID: "x1", ExpiresAt: inventoryT0.Add(time.Minute)},
	} {
		got, err := st.PutBinding(ctx, bd)
		if err != nil {
			t.Fatal(err)
		}
		bds[bd.Broker+"/"+bd.InstanceID+"/"+bd.BindingID] = got
	}
	return st, ins, bds
}

// asJSON is v marshalled and decoded into generic JSON values, with the
// sealed fields replaced as the admin routes replace them.
func asJSON(t *testing.T, v any) map[string]any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	_, params := m["sealed_parameters"]
	delete(m, "sealed_parameters")
	m["parameters_stored"] = params
	if _, isBinding := m["binding_id"]; isBinding {
		_, creds := m["sealed_credentials"]
		delete(m, "sealed_credentials")
		m["credentials_stored"] = creds
	}
	return m
}

// getJSON calls GET path on the admin with the token and decodes a 200
// answer into v.
func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	res, body := adminCall(t, "GET", base+path, testAdminToken)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, body)
	}
}

func TestAdminInstances(t *testing.T) {
	st, ins, _ := seededInventory(t)
	_, base, _ := adminEnvAt(t, testAdminToken, st, osbtest.NewClock(inventoryT0).Now)

	type page struct {
		Instances  []map[string]any `json:"instances"`
		NextCursor string           `json:"next_cursor"`
		Total      int              `json:"total"`
	}
	var p1, p2 page
	getJSON(t, base, "/admin/instances?limit=2", &p1)
	if p1.Total != 3 || len(p1.Instances) != 2 || p1.NextCursor == "" {
		t.Fatalf("first page: %d instances, total %d, next %q; want 2, 3 and a cursor", len(p1.Instances), p1.Total, p1.NextCursor)
	}
	getJSON(t, base, "/admin/instances?limit=2&cursor="+url.QueryEscape(p1.NextCursor), &p2)
	if p2.Total != 3 || len(p2.Instances) != 1 || p2.NextCursor != "" {
		t.Fatalf("second page: %d instances, total %d, next %q; want 1, 3 and none", len(p2.Instances), p2.Total, p2.NextCursor)
	}
	want := []map[string]any{asJSON(t, ins["i1"]), asJSON(t, ins["i2"]), asJSON(t, ins["i3"])}
	if d := cmp.Diff(want, append(p1.Instances, p2.Instances...)); d != "" {
		t.Errorf("instances (-want +got):\n%s", d)
	}
	if want[0]["parameters_stored"] != true || want[1]["parameters_stored"] != false {
		t.Fatalf("asJSON does not mark stored parameters: %v", want)
	}

	var byTenant page
	getJSON(t, base, "/admin/instances?tenant=t1&broker=b", &byTenant)
	if byTenant.Total != 2 || len(byTenant.Instances) != 2 || byTenant.Instances[1]["instance_id"] != "i3" {
		t.Errorf("tenant t1: %+v, want i1 and i3, total 2", byTenant)
	}
	var none page
	getJSON(t, base, "/admin/instances?broker=nobody", &none)
	if none.Total != 0 || none.Instances == nil || len(none.Instances) != 0 {
		t.Errorf("a broker without instances: %+v, want an empty list", none)
	}
}

func TestAdminInstance(t *testing.T) {
	st, ins, bds := seededInventory(t)
	_, base, _ := adminEnvAt(t, testAdminToken, st, osbtest.NewClock(inventoryT0).Now)
	type answer struct {
		Instance map[string]any   `json:"instance"`
		Bindings []map[string]any `json:"bindings"`
	}
	var got answer
	getJSON(t, base, "/admin/instances/b/i1", &got)
	want := answer{Instance: asJSON(t, ins["i1"]), Bindings: []map[string]any{asJSON(t, bds["b/i1/x1"]), asJSON(t, bds["b/i1/x2"])}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("GET /admin/instances/b/i1 (-want +got):\n%s", d)
	}
	if got.Bindings[0]["credentials_stored"] != true || got.Bindings[1]["credentials_stored"] != false {
		t.Errorf("credentials_stored of x1, x2 = %v, %v; want true, false", got.Bindings[0]["credentials_stored"], got.Bindings[1]["credentials_stored"])
	}
	// Bindings of an instance the gateway never recorded: the instance is
	// null, the bindings are there.
	var orphaned answer
	getJSON(t, base, "/admin/instances/b/i9", &orphaned)
	if want := (answer{Bindings: []map[string]any{asJSON(t, bds["b/i9/x1"])}}); !cmp.Equal(want, orphaned) {
		t.Errorf("GET /admin/instances/b/i9 (-want +got):\n%s", cmp.Diff(want, orphaned))
	}
}

func TestAdminExpiringBindings(t *testing.T) {
	st, _, bds := seededInventory(t)
	clock := osbtest.NewClock(inventoryT0)
	_, base, _ := adminEnvAt(t, testAdminToken, st, clock.Now)
	type answer struct {
		Bindings      []map[string]any `json:"bindings"`
		Total         int              `json:"total"`
		Truncated     bool             `json:"truncated"`
		WithinSeconds float64          `json:"within_seconds"`
		Before        time.Time        `json:"before"`
	}
	expiring := func(key string, in time.Duration) map[string]any {
		m := asJSON(t, bds[key])
		m["expires_in_seconds"] = in.Seconds()
		return m
	}
	for _, tc := range []struct {
		name, query string
		want        answer
	}{
		{"inventory.expiry_warning (7 days)", "", answer{
			Bindings: []map[string]any{expiring("b/i9/x1", -time.Hour), expiring("gone/i1/x1", time.Minute), expiring("b/i1/x1", time.Hour)},
			Total:    3, WithinSeconds: 7 * 24 * 3600, Before: inventoryT0.Add(7 * 24 * time.Hour)}},
		{"within 31 days, broker b", "?within=744h&broker=b", answer{
			Bindings: []map[string]any{expiring("b/i9/x1", -time.Hour), expiring("b/i1/x1", time.Hour), expiring("b/i2/x1", 30*24*time.Hour)},
			Total:    3, WithinSeconds: 744 * 3600, Before: inventoryT0.Add(744 * time.Hour)}},
		{"a page of one", "?within=744h&limit=1", answer{
			Bindings: []map[string]any{expiring("b/i9/x1", -time.Hour)},
			Total:    4, Truncated: true, WithinSeconds: 744 * 3600, Before: inventoryT0.Add(744 * time.Hour)}},
		{"within 0: the expired ones", "?within=0s", answer{
			Bindings: []map[string]any{expiring("b/i9/x1", -time.Hour)}, Total: 1, Before: inventoryT0}},
		{"a broker with none", "?broker=nobody", answer{
			Bindings: []map[string]any{}, WithinSeconds: 7 * 24 * 3600, Before: inventoryT0.Add(7 * 24 * time.Hour)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got answer
			getJSON(t, base, "/admin/bindings/expiring"+tc.query, &got)
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

// TestAdminInventoryRefusals pins the error bodies of the inventory routes.
func TestAdminInventoryRefusals(t *testing.T) {
	st, _, _ := seededInventory(t)
	_, base, _ := adminEnvAt(t, testAdminToken, st, osbtest.NewClock(inventoryT0).Now)
	for _, tc := range []struct{ name, path string }{
		{"admin_no_instance", "/admin/instances/b/nope"},
		{"admin_instances_bad_limit", "/admin/instances?limit=ten"},
		{"admin_instances_bad_cursor", "/admin/instances?cursor=not-a-cursor"},
		{"admin_expiring_bad_within", "/admin/bindings/expiring?within=-1h"},
		{"admin_expiring_bad_limit", "/admin/bindings/expiring?limit=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := adminCall(t, "GET", base+tc.path, testAdminToken)
			checkGolden(t, tc.name, res, body)
		})
	}
}

// TestAdminInventoryNeverShowsSecrets is the secret-marker test of the
// admin routes: parameters and credentials stored sealed, whose plaintext
// holds a marker, show in no answer (neither the marker nor the sealed
// bytes in any encoding), no log line and no metric; a control with the
// marker in a field that is not secret shows the scan would see it.
func TestAdminInventoryNeverShowsSecrets(t *testing.T) {
	for _, leak := range []bool{false, true} {
		st, ins, bds := seededInventory(t)
		if leak {
			in := ins["i1"]
			in.LastOperation.Description = "the password is " + adminMarker
			if _, err := st.PutInstance(context.Background(), in); err != nil {
				t.Fatal(err)
			}
		}
		clock := osbtest.NewClock(inventoryT0)
		a, base, logs := adminEnvAt(t, testAdminToken, st, clock.Now)
		var answers strings.Builder
		for _, path := range []string{"/admin/instances", "/admin/instances?tenant=t1", "/admin/instances/b/i1",
			"/admin/bindings/expiring", "/admin/bindings/expiring?within=8760h", "/admin/operations", "/admin/brokers"} {
			res, body := adminCall(t, "GET", base+path, testAdminToken)
			if res.StatusCode != 200 {
				t.Fatalf("GET %s: %d %s", path, res.StatusCode, body)
			}
			answers.WriteString(body)
		}
		found := func(where, text string) bool {
			if strings.Contains(text, adminMarker) {
				return true
			}
			for _, sealed := range [][]byte{ins["i1"].SealedParameters, bds["b/i1/x1"].SealedParameters, bds["b/i1/x1"].SealedCredentials} {
				for _, enc := range []string{base64.StdEncoding.EncodeToString(sealed), base64.RawURLEncoding.EncodeToString(sealed), string(sealed)} {
					if strings.Contains(text, enc) {
						t.Errorf("%s holds sealed bytes", where)
					}
				}
			}
			if strings.Contains(text, "sealed_") {
				t.Errorf("%s names a sealed field", where)
			}
			return false
		}
		p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
		m, err := proxy.NewMetrics(p.Registerer, clock.Now)
		if err != nil {
			t.Fatal(err)
		}
		m.ObserveExpiring(a.gw.CountExpiringBindings)
		metrics := scrape(t, p.MetricsHandler())
		if !strings.Contains(metrics, `osb_gateway_bindings_expiring{broker="b"} 2`) {
			t.Errorf("/metrics lacks the expiring bindings of broker b:\n%s", metrics)
		}
		if found("/metrics", metrics) {
			t.Errorf("the marker is in /metrics")
		}
		if got := found("the admin answers", answers.String()); got != leak {
			t.Errorf("leak %t: the marker is in the admin answers: %t\n%s", leak, got, answers.String())
		}
		if found("the admin log", logs.String()) {
			t.Errorf("the marker is in the admin log:\n%s", logs)
		}
	}
}

// TestAdminShowsWhatTheGatewayRecorded is the secret-marker test end to
// end: a provision with a secret parameter and a bind through the gateway,
// with inventory.secrets encrypted, leave records whose admin answers say
// parameters and credentials are stored and show neither them, nor the
// marker, nor the broker's credentials; the gateway's and the admin's logs
// neither.
func TestAdminShowsWhatTheGatewayRecorded(t *testing.T) {
	broker := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: -1})
	bs := httptest.NewServer(broker)
	t.Cleanup(bs.Close)
	keyFile := filepath.Join(t.TempDir(), "inventory.keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{5}, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
admin: {address: "off", token: "`+testAdminToken+`"}
inventory: {key_file: `+keyFile+`}
brokers: [{name: b, url: "`+bs.URL+`", username: sample, password: sample-secret, inventory: {secrets: encrypted}}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	gwLog := &osbtest.Buffer{}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.NewJSONHandler(gwLog, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	adminLog := &osbtest.Buffer{}
	a := New(proxy.NewView(proxy.NewSwitch(g)), Options{Log: slog.New(slog.NewJSONHandler(adminLog, nil))})
	admin := httptest.NewServer(a)
	t.Cleanup(admin.Close)

	provision := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID +
		`","organization_guid":"org-1","space_guid":"space-1","parameters":{"password":"` + adminMarker + `"}}`
	if res, body := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i-1", t1User, t1Pass, "2.15", strings.NewReader(provision)); res.StatusCode != 201 {
		t.Fatalf("provision: %d %s", res.StatusCode, body)
	}
	bind := `{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanSyncID +
		`","app_guid":"app-1","parameters":{"token":"` + adminMarker + `"}}`
	res, body := do(t, "PUT", gw.URL+"/t1/b/v2/service_instances/i-1/service_bindings/x-1", t1User, t1Pass, "2.15", strings.NewReader(bind))
	if res.StatusCode != 201 {
		t.Fatalf("bind: %d %s", res.StatusCode, body)
	}
	var answer struct {
		Credentials struct{ Password string } `json:"credentials"`
	}
	if err := json.Unmarshal([]byte(body), &answer); err != nil || answer.Credentials.Password == "" {
		t.Fatalf("bind answer %s: %v", body, err)
	}

	var one struct {
		Instance map[string]any   `json:"instance"`
		Bindings []map[string]any `json:"bindings"`
	}
	getJSON(t, admin.URL, "/admin/instances/b/i-1", &one)
	if one.Instance["parameters_stored"] != true || len(one.Bindings) != 1 ||
		one.Bindings[0]["parameters_stored"] != true || one.Bindings[0]["credentials_stored"] != true {
		t.Errorf("the admin answer does not say the secrets are stored: %+v", one)
	}
	var answers strings.Builder
	for _, path := range []string{"/admin/instances", "/admin/instances/b/i-1", "/admin/bindings/expiring?within=87600h"} {
		_, body := adminCall(t, "GET", admin.URL+path, testAdminToken)
		answers.WriteString(body)
	}
	for where, text := range map[string]string{"the admin answers": answers.String(), "the admin log": adminLog.String(), "the gateway log": gwLog.String()} {
		for _, secret := range []string{adminMarker, answer.Credentials.Password} {
			if strings.Contains(text, secret) {
				t.Errorf("%s hold a secret %q", where, secret)
			}
		}
		if strings.Contains(text, "sealed_") {
			t.Errorf("%s name a sealed field", where)
		}
	}
}
