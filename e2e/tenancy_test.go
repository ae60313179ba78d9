package e2e

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// tenancyYAML puts the sample broker and the brokerapi broker behind one
// gateway for two tenants that both reach both: cf-prod and cf-dev, each
// through a plain route to each broker and an ids route to the sample
// broker.
const tenancyYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
  - name: brokerapi
    url: ${API_URL}/osb/
    username: api-user
    password: ${API_PASS}
    api_version: {min: "2.14", max: "2.17"}
    timeout: 10s
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes:
      - {broker: sample, prefix: /prod/sample}
      - {broker: sample, prefix: /prod/sample-ids, ids: {namespace: cf-prod}}
      - {broker: brokerapi, prefix: /prod/api}
  - name: cf-dev
    credentials: [{username: cf-dev-user, password: cf-dev-pass}]
    routes:
      - {broker: sample, prefix: /dev/sample}
      - {broker: sample, prefix: /dev/sample-ids, ids: {namespace: cf-dev}}
      - {broker: brokerapi, prefix: /dev/api}
`

// tenancyRoute is one route of tenancyYAML, with the client of its tenant
// and the ids its catalog shows.
type tenancyRoute struct {
	prefix, broker string
	client         osb.Client
	service, plan  string
}

// TestTenantCannotReachAnotherTenantsInstances is the cross-tenant matrix,
// with the real OSB client on the lean and the standard server, in front
// of the sample broker (plain and ids routes) and a brokerapi broker:
// cf-prod makes an instance and a binding through each of its routes;
// cf-dev, through each of its routes to the same broker, fetches, updates,
// binds, fetches the binding, polls both, unbinds and deprovisions them.
// Every call gets the answer for an instance the broker does not hold
// (rules.NotOwned), none reaches a broker, no credential crosses, and
// cf-prod's instances stay whole at the brokers and usable by cf-prod.
func TestTenantCannotReachAnotherTenantsInstances(t *testing.T) {
	for _, server := range []string{config.ServerLean, config.ServerStandard} {
		t.Run(server, func(t *testing.T) { tenancyMatrix(t, server) })
	}
}

func tenancyMatrix(t *testing.T, server string) {
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})
	api := newAPIBroker(clk.Now, asyncDelay)
	quiet := slog.New(slog.DiscardHandler)
	taps := map[string]*bodyTap{
		"sample":    {h: sample},
		"brokerapi": {h: http.StripPrefix(apiBase, brokerapi.New(api, quiet, brokerapi.BrokerCredentials{Username: apiUser, Password: apiPass}))},
	}
	vars := map[string]string{"SAMPLE_PASS": samplePass, "API_PASS": apiPass}
	for name, key := range map[string]string{"sample": "SAMPLE_URL", "brokerapi": "API_URL"} {
		srv := httptest.NewServer(taps[name])
		t.Cleanup(srv.Close)
		vars[key] = srv.URL
	}
	cfg, err := config.Parse([]byte(tenancyYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: quiet, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{clock: clk, sample: sample, gateway: &tap{h: g}}
	e.url = serveGatewayOn(t, e.gateway, server)

	route := func(prefix, broker, user, pass, serviceName, planName string) *tenancyRoute {
		r := &tenancyRoute{prefix: prefix, broker: broker, client: e.client(t, prefix, osb.LatestAPIVersion(), user, pass)}
		cat, err := r.client.GetCatalog()
		if err != nil {
			t.Fatalf("%s catalog: %v", prefix, err)
		}
		for _, s := range cat.Services {
			for _, p := range s.Plans {
				if s.Name == serviceName && p.Name == planName {
					r.service, r.plan = s.ID, p.ID
				}
			}
		}
		if r.plan == "" {
			t.Fatalf("%s: no plan %s/%s in %+v", prefix, serviceName, planName, cat)
		}
		return r
	}
	pairs := []struct{ prod, dev *tenancyRoute }{
		{route("/prod/sample", "sample", prodUser, prodPass, samplebroker.ServiceName, samplebroker.PlanSyncName),
			route("/dev/sample", "sample", devUser, devPass, samplebroker.ServiceName, samplebroker.PlanSyncName)},
		{route("/prod/sample-ids", "sample", prodUser, prodPass, samplebroker.ServiceName, samplebroker.PlanSyncName),
			route("/dev/sample-ids", "sample", devUser, devPass, samplebroker.ServiceName, samplebroker.PlanSyncName)},
		{route("/prod/api", "brokerapi", prodUser, prodPass, apiServiceName, apiPlanSyncName),
			route("/dev/api", "brokerapi", devUser, devPass, apiServiceName, apiPlanSyncName)},
	}
	for i, p := range pairs {
		id, bid := fmt.Sprintf("prod-%d", i), fmt.Sprintf("prod-%d-binding", i)
		pc := p.prod.client
		if _, err := pc.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: p.prod.service, PlanID: p.prod.plan,
			OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
			t.Fatalf("%s provision: %v", p.prod.prefix, err)
		}
		app := "app-" + id
		bound, err := pc.Bind(&osb.BindRequest{InstanceID: id, BindingID: bid, ServiceID: p.prod.service, PlanID: p.prod.plan,
			BindResource: &osb.BindResource{AppGUID: &app}})
		if err != nil || len(bound.Credentials) == 0 {
			t.Fatalf("%s bind: %v %+v", p.prod.prefix, err, bound)
		}
		secret := fmt.Sprint(bound.Credentials["password"])

		// Every call of cf-dev's through its route to the same broker, on
		// cf-prod's instance and binding, with cf-dev's own ids.
		dc, svc, plan := p.dev.client, p.dev.service, p.dev.plan
		devApp := "dev-app"
		calls := []struct {
			name   string
			status int
			call   func() error
		}{
			{"GET instance", 404, func() error { _, err := dc.GetInstance(&osb.GetInstanceRequest{InstanceID: id}); return err }},
			{"PATCH", 404, func() error {
				_, err := dc.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: svc, PlanID: &plan})
				return err
			}},
			{"bind", 404, func() error {
				_, err := dc.Bind(&osb.BindRequest{InstanceID: id, BindingID: "dev-binding", ServiceID: svc, PlanID: plan,
					BindResource: &osb.BindResource{AppGUID: &devApp}})
				return err
			}},
			{"GET binding", 404, func() error {
				_, err := dc.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bid})
				return err
			}},
			{"last_operation", 410, func() error {
				_, err := dc.PollLastOperation(&osb.LastOperationRequest{InstanceID: id, ServiceID: &svc, PlanID: &plan})
				return err
			}},
			{"binding last_operation", 410, func() error {
				_, err := dc.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: id, BindingID: bid, ServiceID: &svc, PlanID: &plan})
				return err
			}},
			{"unbind", 410, func() error {
				_, err := dc.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: svc, PlanID: plan})
				return err
			}},
			{"DELETE", 410, func() error {
				_, err := dc.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: svc, PlanID: plan})
				return err
			}},
		}
		tp := taps[p.dev.broker]
		for _, c := range calls {
			before := len(tp.requests())
			err := c.call()
			// The client takes a 410 to a deletion as done (nil): what the
			// platform was sent is on the gateway's tap.
			if got := e.gateway.last(t); got.Status != c.status || !strings.Contains(got.Body, `tenant \"cf-dev\" holds no service instance`) {
				t.Errorf("%s on %s's %s: %d %s (client: %v), want %d", p.dev.prefix, p.prod.prefix, c.name, got.Status, got.Body, err, c.status)
			}
			var he osb.HTTPStatusCodeError
			if c.status != 410 && (!errors.As(err, &he) || he.StatusCode != c.status) {
				t.Errorf("%s %s: the client got %v, want status %d", p.dev.prefix, c.name, err, c.status)
			}
			if got := tp.requests()[before:]; len(got) != 0 {
				t.Errorf("%s %s reached broker %s: %q", p.dev.prefix, c.name, p.dev.broker, got)
			}
			if strings.Contains(e.gateway.last(t).Body, secret) {
				t.Errorf("%s %s: cf-prod's credential crossed", p.dev.prefix, c.name)
			}
		}

		// cf-prod's instance and binding are whole: it reads them, with
		// the credentials, and deletes them.
		got, err := pc.GetBinding(&osb.GetBindingRequest{InstanceID: id, BindingID: bid})
		if err != nil || fmt.Sprint(got.Credentials["password"]) != secret {
			t.Errorf("%s: cf-prod's binding after cf-dev's calls: %v %+v", p.prod.prefix, err, got)
		}
		if _, err := pc.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: p.prod.service, PlanID: p.prod.plan}); err != nil {
			t.Errorf("%s: cf-prod's unbind: %v", p.prod.prefix, err)
		}
		if _, err := pc.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: p.prod.service, PlanID: p.prod.plan}); err != nil {
			t.Errorf("%s: cf-prod's deprovision: %v", p.prod.prefix, err)
		}
	}
}
