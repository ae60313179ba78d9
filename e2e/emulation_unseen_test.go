package e2e

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"code.cloudfoundry.org/brokerapi/v13"
	"code.cloudfoundry.org/brokerapi/v13/domain"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// staleBroker is a 2.14+ brokerapi broker whose catalog says its
// instances and bindings are not retrievable, and whose GET instance
// answers anyway, from what it once provisioned: 200 with stale data
// after the deprovision (as worlds-simplest-service-broker does). With
// retrievable it is the honest apiBroker it wraps, whose catalog says
// both are retrievable.
type staleBroker struct {
	*apiBroker
	retrievable bool
	fetches     atomic.Int64 // GET instance calls

	mu   sync.Mutex
	once map[string]domain.GetInstanceDetailsSpec // guarded by mu; every instance ever provisioned
}

func newStaleBroker(retrievable bool) *staleBroker {
	// The plan used is synchronous: nothing waits on the broker's clock.
	return &staleBroker{apiBroker: newAPIBroker(time.Now, asyncDelay), retrievable: retrievable, once: map[string]domain.GetInstanceDetailsSpec{}}
}

// Services implements domain.ServiceBroker.
func (b *staleBroker) Services(ctx context.Context) ([]domain.Service, error) {
	svcs, err := b.apiBroker.Services(ctx)
	for i := range svcs {
		svcs[i].InstancesRetrievable, svcs[i].BindingsRetrievable = b.retrievable, b.retrievable
	}
	return svcs, err
}

// Provision implements domain.ServiceBroker.
func (b *staleBroker) Provision(ctx context.Context, id string, d domain.ProvisionDetails, async bool) (domain.ProvisionedServiceSpec, error) {
	spec, err := b.apiBroker.Provision(ctx, id, d, async)
	if err == nil {
		b.mu.Lock()
		b.once[id] = domain.GetInstanceDetailsSpec{ServiceID: d.ServiceID, PlanID: d.PlanID, DashboardURL: spec.DashboardURL}
		b.mu.Unlock()
	}
	return spec, err
}

// GetInstance implements domain.ServiceBroker.
func (b *staleBroker) GetInstance(ctx context.Context, id string, d domain.FetchInstanceDetails) (domain.GetInstanceDetailsSpec, error) {
	b.fetches.Add(1)
	if b.retrievable {
		return b.apiBroker.GetInstance(ctx, id, d)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if spec, ok := b.once[id]; ok {
		return spec, nil
	}
	return b.apiBroker.GetInstance(ctx, id, d)
}

// unseenYAML puts one brokerapi broker (2.14 to 2.17) behind the gateway
// with fetch and gone emulated.
const unseenYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: stale
    url: ${URL}/osb/
    username: api-user
    password: ${PASS}
    api_version: {min: "2.14", max: "2.17"}
    timeout: 10s
    emulate: {fetch: true, gone: true}
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes: [{broker: stale}]
`

// staleEnv is a staleBroker behind a gateway, and the platform's client.
type staleEnv struct {
	broker *staleBroker
	url    string // the broker's, without apiBase
	client osb.Client
}

func newStaleEnv(t *testing.T, retrievable bool) *staleEnv {
	t.Helper()
	b := newStaleBroker(retrievable)
	srv := httptest.NewServer(http.StripPrefix(apiBase, brokerapi.New(b, slog.New(slog.DiscardHandler), brokerapi.BrokerCredentials{Username: apiUser, Password: apiPass})))
	t.Cleanup(srv.Close)
	vars := map[string]string{"URL": srv.URL, "PASS": apiPass}
	cfg, err := config.Parse([]byte(unseenYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{url: serveGateway(t, g)}
	return &staleEnv{broker: b, url: srv.URL, client: e.client(t, "/cf-prod/stale", osb.Version2_14(), prodUser, prodPass)}
}

// direct GETs the instance at the broker itself, as the gateway would.
func (e *staleEnv) direct(t *testing.T, id string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.url+apiBase+"/v2/service_instances/"+id, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(apiUser, apiPass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestEmulatedFetchNeverForwardsAnUnseenInstance: emulate.fetch and gone,
// a 2.14+ broker whose catalog says instances_retrievable: false and
// which answers GET instance with what it held before the deprovision.
// The Kubernetes OSB client's GET instance of an id the gateway never saw,
// and of one it saw deprovisioned (the conformance check
// get-instance-after-deprovision-404), gets the gateway's 404, never the
// broker's stale 200: the broker gets no GET instance at all. What the
// gateway saw succeed is answered from the inventory.
func TestEmulatedFetchNeverForwardsAnUnseenInstance(t *testing.T) {
	t.Parallel()
	e := newStaleEnv(t, false)
	c := e.client
	notFound := func(what, id string) {
		t.Helper()
		_, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		he, ok := osb.IsHTTPError(err)
		if !ok || he.StatusCode != http.StatusNotFound {
			t.Fatalf("GET instance %s: %v, want 404", what, err)
		}
		var desc string
		if he.Description != nil {
			desc = *he.Description
		}
		if !strings.Contains(desc, `never saw service instance "`+id+`" provisioned`) || !strings.Contains(desc, "saw it deprovisioned") {
			t.Errorf("GET instance %s: description %q, want it to name the instance and that the gateway never saw it provisioned or saw it deprovisioned", what, desc)
		}
	}

	notFound("of an id the gateway never saw", "never-seen")
	if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-1", ServiceID: apiServiceID, PlanID: apiPlanSyncID,
		OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	got, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-1"})
	if err != nil || got.ServiceID != apiServiceID || got.PlanID != apiPlanSyncID {
		t.Fatalf("GET instance of a provisioned instance: %+v, %v; want its service and plan from the inventory", got, err)
	}
	if _, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i-1", ServiceID: apiServiceID, PlanID: apiPlanSyncID}); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	notFound("after its deprovision", "i-1")
	if n := e.broker.fetches.Load(); n != 0 {
		t.Errorf("the broker got %d GET instance calls through the gateway, want none", n)
	}
	if st := e.direct(t, "i-1"); st != http.StatusOK {
		t.Errorf("the broker itself answers GET of the deprovisioned instance with %d; the test needs its stale 200", st)
	}
}

// TestEmulatedFetchForwardsWhenTheBrokerCanAnswer: the same gateway in
// front of a broker whose catalog says instances_retrievable: true leaves
// GET instance to the broker, for an id it never saw too: the broker's
// own 404 and answer.
func TestEmulatedFetchForwardsWhenTheBrokerCanAnswer(t *testing.T) {
	t.Parallel()
	e := newStaleEnv(t, true)
	if _, err := e.client.GetInstance(&osb.GetInstanceRequest{InstanceID: "never-seen"}); !isStatus(err, http.StatusNotFound) {
		t.Fatalf("GET instance of an id the gateway never saw: %v, want the broker's 404", err)
	}
	if _, err := e.client.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i-1", ServiceID: apiServiceID, PlanID: apiPlanSyncID,
		OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	if _, err := e.client.GetInstance(&osb.GetInstanceRequest{InstanceID: "i-1"}); err != nil {
		t.Fatalf("GET instance: %v", err)
	}
	if n := e.broker.fetches.Load(); n != 2 {
		t.Errorf("the broker got %d GET instance calls, want 2 (it can answer them)", n)
	}
}
