package e2e

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	gwosb "github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy"
	"github.com/osb-gateway/osb-gateway/rules"
)

// syncWaitYAML puts the brokerapi broker behind the gateway with
// emulate.sync_within.
const syncWaitYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: brokerapi
    url: ${API_URL}/osb/
    username: api-user
    password: ${API_PASS}
    api_version: {min: "2.14", max: "2.17"}
    timeout: 10s
    validation: {responses: enforce}
    emulate:
      sync_within: 20s
tenants:
  - name: k8s
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: brokerapi, prefix: /k8s/brokerapi}]
`

// TestSyncWithinBrokerAPI: the Kubernetes OSB client, which sends no
// accepts_incomplete here (as on bind in Kubernetes service catalogs),
// runs a lifecycle through the gateway against a brokerapi broker whose
// async plan provisions, binds, unbinds and deprovisions only
// asynchronously (422 AsyncRequired without the flag). With
// emulate.sync_within each call is answered synchronously: 201, a bind's
// 201 with the credentials the broker's GET binding has, 200, 200; every
// answer passes the response rules of the client's version, and the broker
// saw each call twice (refused, then with accepts_incomplete=true), its
// operation polled.
func TestSyncWithinBrokerAPI(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	api := newAPIBroker(clk.Now, time.Minute)
	api.asyncOnlyBinds = true
	quiet := slog.New(slog.DiscardHandler)
	brokerSide := &tap{h: http.StripPrefix(apiBase, brokerapi.New(api, quiet, brokerapi.BrokerCredentials{Username: apiUser, Password: apiPass})), strip: apiBase}
	bs := httptest.NewServer(brokerSide)
	t.Cleanup(bs.Close)
	vars := map[string]string{"API_URL": bs.URL, "API_PASS": apiPass}
	cfg, err := config.Parse([]byte(syncWaitYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: quiet, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	platformSide := &tap{h: g}
	e := &env{clock: clk, url: serveGateway(t, platformSide), gateway: platformSide}
	c := e.client(t, "/k8s/brokerapi", osb.Version2_14(), prodUser, prodPass)

	// Each call waits at the gateway until the broker's operation is due:
	// the clock moves once the repeat with accepts_incomplete=true reached
	// the broker, and the gateway's next poll finds the operation ended.
	waited := func(t *testing.T, method, path string, call func() error) {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- call() }()
		repeat := func() bool {
			for _, x := range brokerSide.exchanges() {
				if x.Method == method && x.Path == path && strings.Contains(x.Query, "accepts_incomplete=true") {
					return true
				}
			}
			return false
		}
		deadline := time.Now().Add(10 * time.Second)
		for !repeat() {
			if time.Now().After(deadline) {
				t.Fatalf("%s %s: no repeat with accepts_incomplete=true reached the broker", method, path)
			}
			time.Sleep(time.Millisecond)
		}
		clk.Advance(time.Minute)
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s %s: no answer", method, path)
		}
	}
	instancePath := "/v2/service_instances/k8s-1"
	bindingPath := instancePath + "/service_bindings/k8s-b1"
	app := appGUID

	waited(t, "PUT", instancePath, func() error {
		res, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "k8s-1", ServiceID: apiServiceID, PlanID: apiPlanAsyncID,
			OrganizationGUID: orgGUID, SpaceGUID: spaceGUID, Context: cfContext})
		if err == nil && (res.Async || res.DashboardURL == nil || *res.DashboardURL != apiDashboard("k8s-1")) {
			t.Errorf("ProvisionInstance = %+v, want synchronous with the dashboard_url", res)
		}
		return err
	})
	e.wantStatus(t, http.StatusCreated)

	var creds map[string]any
	waited(t, "PUT", bindingPath, func() error {
		res, err := c.Bind(&osb.BindRequest{BindingID: "k8s-b1", InstanceID: "k8s-1", ServiceID: apiServiceID, PlanID: apiPlanAsyncID,
			BindResource: &osb.BindResource{AppGUID: &app}, Context: cfContext})
		if err == nil {
			creds = res.Credentials
			if res.Async || len(creds) == 0 {
				t.Errorf("Bind = %+v, want synchronous with credentials", res)
			}
		}
		return err
	})
	e.wantStatus(t, http.StatusCreated)
	got, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: "k8s-1", BindingID: "k8s-b1"})
	if err != nil {
		t.Fatalf("GetBinding: %v", err)
	}
	if diff := cmp.Diff(got.Credentials, creds); diff != "" {
		t.Errorf("credentials (-GET binding +bind):\n%s", diff)
	}

	waited(t, "DELETE", bindingPath, func() error {
		_, err := c.Unbind(&osb.UnbindRequest{BindingID: "k8s-b1", InstanceID: "k8s-1", ServiceID: apiServiceID, PlanID: apiPlanAsyncID})
		return err
	})
	e.wantStatus(t, http.StatusOK)
	waited(t, "DELETE", instancePath, func() error {
		_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "k8s-1", ServiceID: apiServiceID, PlanID: apiPlanAsyncID})
		return err
	})
	e.wantStatus(t, http.StatusOK)

	// What the platform got passes the rules of its version.
	endpoints := map[string]rules.Endpoint{"PUT " + instancePath: rules.Provision, "PUT " + bindingPath: rules.Bind,
		"DELETE " + bindingPath: rules.Unbind, "DELETE " + instancePath: rules.Deprovision, "GET " + bindingPath: rules.GetBinding}
	for _, x := range platformSide.exchanges() {
		ep := endpoints[x.Method+" "+strings.TrimPrefix(x.Path, "/k8s/brokerapi")]
		if ep == rules.Unknown {
			continue
		}
		if _, vs := rules.CheckResponse(rules.Call{Endpoint: ep}, gwosb.Version{Major: 2, Minor: 14}, x.Status, []byte(x.Body), nil, rules.ResponseOptions{}); len(vs) != 0 {
			t.Errorf("%s %s answered %d %s: breaks %v", x.Method, x.Path, x.Status, x.Body, vs)
		}
	}
	// What the broker saw: each call refused, repeated with the flag,
	// polled; the bind's credentials fetched.
	var seen []string
	for _, x := range brokerSide.exchanges() {
		if x.Path == "/v2/catalog" || strings.HasSuffix(x.Path, "/last_operation") {
			continue
		}
		seen = append(seen, x.Method+" "+x.Path+" "+flagOf(x.Query)+" "+http.StatusText(x.Status))
	}
	want := []string{
		"PUT " + instancePath + "  Unprocessable Entity", "PUT " + instancePath + " async Accepted",
		"PUT " + bindingPath + "  Unprocessable Entity", "PUT " + bindingPath + " async Accepted", "GET " + bindingPath + "  OK",
		"GET " + bindingPath + "  OK", // the platform's own GetBinding
		"DELETE " + bindingPath + "  Unprocessable Entity", "DELETE " + bindingPath + " async Accepted",
		"DELETE " + instancePath + "  Unprocessable Entity", "DELETE " + instancePath + " async Accepted",
	}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("the broker's calls (-want +got):\n%s", diff)
	}
}

// flagOf says whether a query asked for an asynchronous answer.
func flagOf(query string) string {
	if strings.Contains(query, "accepts_incomplete=true") {
		return "async"
	}
	return ""
}
