package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// legacyEmulatedYAML puts the 2.8 sample broker behind the gateway with the
// emulations on and secrets kept sealed.
const legacyEmulatedYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
inventory:
  key_file: ${KEY_FILE}
brokers:
  - name: legacy
    url: ${LEGACY_URL}
    username: legacy-user
    password: ${LEGACY_PASS}
    api_version: {max: "2.8"}
    timeout: 10s
    inventory: {secrets: encrypted}
    emulate: {fetch: true, advertise: true, idempotent: true, gone: true}
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: legacy}]
`

// TestLegacyBrokerPassesAsModern: the Kubernetes OSB client with alpha
// features (GET instance and binding, async bindings) runs the lifecycle
// through the gateway against a 2.8 sample broker that has neither: the
// gateway serves the fetches from its inventory and the bind asking for
// async is answered synchronously by the broker.
func TestLegacyBrokerPassesAsModern(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	legacy := samplebroker.New(samplebroker.Options{Username: legacyUser, Password: legacyPass, AsyncDelay: asyncDelay, Now: clk.Now, Legacy: true})
	bs := httptest.NewServer(legacy)
	t.Cleanup(bs.Close)
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	keyFile := filepath.Join(t.TempDir(), "keys")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)), 0o600); err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{"LEGACY_URL": bs.URL, "LEGACY_PASS": legacyPass, "KEY_FILE": keyFile}
	cfg, err := config.Parse([]byte(legacyEmulatedYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{url: serveGateway(t, g)}
	c := e.client(t, prodLegacy, osb.Version2_14(), prodUser, prodPass)

	cat, err := c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	var svc *osb.Service
	for i := range cat.Services {
		if cat.Services[i].ID == samplebroker.ServiceID {
			svc = &cat.Services[i]
		}
	}
	if svc == nil || svc.InstancesRetrievable != true || svc.BindingsRetrievable != true {
		t.Fatalf("catalog does not advertise fetches: %+v", svc)
	}
	params := map[string]any{"size": "small"}
	prov, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-legacy", AcceptsIncomplete: true,
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID,
		Context: cfContext, Parameters: params})
	if err != nil || prov.Async {
		t.Fatalf("provision: %+v, %v", prov, err)
	}
	again, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-legacy", AcceptsIncomplete: true,
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID,
		Context: cfContext, Parameters: params})
	if err != nil || again.Async {
		t.Fatalf("repeated provision: %+v, %v", again, err)
	}
	got, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-legacy"})
	if err != nil {
		t.Fatalf("GET instance: %v", err)
	}
	if got.ServiceID != samplebroker.ServiceID || got.PlanID != samplebroker.PlanSyncID || !reflect.DeepEqual(got.Parameters, params) {
		t.Errorf("GET instance: %+v", got)
	}
	app := appGUID
	bind, err := c.Bind(&osb.BindRequest{BindingID: "b-legacy", InstanceID: "i-legacy", AcceptsIncomplete: true,
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID, AppGUID: &app, BindResource: &osb.BindResource{AppGUID: &app}})
	if err != nil || bind.Async || len(bind.Credentials) == 0 {
		t.Fatalf("bind asking for async: %+v, %v", bind, err)
	}
	gb, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: "i-legacy", BindingID: "b-legacy"})
	if err != nil || !reflect.DeepEqual(gb.Credentials, bind.Credentials) {
		t.Fatalf("GET binding: %+v, %v (bind gave %v)", gb, err, bind.Credentials)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: "i-legacy", BindingID: "b-legacy", AcceptsIncomplete: true,
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	if _, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: "i-legacy", BindingID: "b-legacy"}); !isStatus(err, 404) {
		t.Errorf("GET binding after unbind: %v, want 404", err)
	}
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-legacy", AcceptsIncomplete: true,
		ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	if _, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-legacy"}); !isStatus(err, 404) {
		t.Errorf("GET instance after deprovision: %v, want 404", err)
	}
	if n := legacy.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the legacy broker got %d provisions, want 1", n)
	}
}

// isStatus reports whether err is the OSB client's error for an answer of
// status.
func isStatus(err error, status int) bool {
	he, ok := osb.IsHTTPError(err)
	return ok && he.StatusCode == status
}
