package e2e

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// quotaYAML is the sample broker behind tenant cf-prod, whose quota admits
// five instances of the sample service's sync plan, by name.
const quotaYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    quotas: [{service: sample, plan: sync, max_instances: 5}]
    routes: [{broker: sample}]
`

// quotaEnv is the sample broker behind one gateway on bolt, or two on one
// redis-server, each gateway with its own metrics registry.
type quotaEnv struct {
	sample  *samplebroker.Broker
	urls    []string
	regs    []*prometheus.Registry
	stores  []store.Store
	clients []osb.Client
}

func newQuotaEnv(t *testing.T, kind string) *quotaEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	q := &quotaEnv{sample: samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})}
	bs := httptest.NewServer(q.sample)
	t.Cleanup(bs.Close)
	vars := map[string]string{"SAMPLE_URL": bs.URL, "SAMPLE_PASS": samplePass}
	cfg, err := config.Parse([]byte(quotaYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	sc, replicas := store.Config{Backend: store.BackendBolt, Path: filepath.Join(t.TempDir(), "state.db")}, 1
	if kind == store.BackendRedis {
		r := storetest.StartRedis(t)
		sc, replicas = store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, 2
	}
	for range replicas {
		st, err := backend.Open(sc, clk.Now)
		if err != nil {
			t.Fatalf("backend.Open: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		reg := prometheus.NewRegistry()
		m, err := proxy.NewMetrics(reg, clk.Now)
		if err != nil {
			t.Fatal(err)
		}
		g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st, Metrics: m, BrokerTransport: suiteTransport})
		if err != nil {
			t.Fatalf("proxy.New: %v", err)
		}
		t.Cleanup(func() { g.Close(nil) })
		e := &env{url: serveGateway(t, g)}
		q.urls, q.regs, q.stores = append(q.urls, e.url), append(q.regs, reg), append(q.stores, st)
		q.clients = append(q.clients, e.client(t, prodSample, osb.Version2_14(), prodUser, prodPass))
	}
	return q
}

// quotaUsed reads osb_gateway_quota_used{tenant,quota} of replica i; -1:
// no such series.
func (q *quotaEnv) quotaUsed(t *testing.T, i int, tenant, quota string) float64 {
	t.Helper()
	mfs, err := q.regs[i].Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "osb_gateway_quota_used" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["tenant"] == tenant && labels["quota"] == quota {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// TestQuotaAdmitsExactly: 20 provisions of distinct instances race against
// a quota of 5, on one gateway on bolt and on two gateways sharing a
// redis-server (round robin): exactly 5 reach the broker and succeed, the
// 15 others get 422 naming the quota, and a provision of another plan,
// which the quota does not count, still passes.
func TestQuotaAdmitsExactly(t *testing.T) {
	for _, backend := range []string{store.BackendBolt, store.BackendRedis} {
		t.Run(backend, func(t *testing.T) {
			q := newQuotaEnv(t, backend)
			const racers = 20
			errs := make([]error, racers)
			var wg sync.WaitGroup
			start := make(chan struct{})
			for i := range racers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					_, errs[i] = q.clients[i%len(q.clients)].ProvisionInstance(&osb.ProvisionRequest{InstanceID: fmt.Sprintf("q-%02d", i),
						AcceptsIncomplete: true, ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID,
						OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
				}()
			}
			close(start)
			wg.Wait()
			admitted, refused := 0, 0
			for i, err := range errs {
				var he osb.HTTPStatusCodeError
				switch {
				case err == nil:
					admitted++
				case errors.As(err, &he) && he.StatusCode == http.StatusUnprocessableEntity && he.Description != nil &&
					strings.Contains(*he.Description, `quota "sample/sync" of tenant "cf-prod" is reached: it admits 5`):
					refused++
				default:
					t.Errorf("provision q-%02d: %v, want 201 or the quota's 422", i, err)
				}
			}
			if admitted != 5 || refused != racers-5 {
				t.Errorf("admitted %d, refused %d; want 5 and %d", admitted, refused, racers-5)
			}
			if n := q.sample.Count("provision"); n != 5 {
				t.Errorf("the broker got %d provisions, want exactly 5", n)
			}
			if n, err := q.stores[0].CountInstances(context.Background(), store.InstanceFilter{Broker: "sample", Tenant: "cf-prod"}); err != nil || n != 5 {
				t.Errorf("inventory: %d instances (%v), want 5", n, err)
			}
			var used float64
			for i := range q.regs {
				used = max(used, q.quotaUsed(t, i, "cf-prod", "sample/sync"))
			}
			if used != 5 {
				t.Errorf("osb_gateway_quota_used{tenant=cf-prod,quota=sample/sync} = %v on the replicas, want 5 on the latest to count", used)
			}

			// Another plan is not counted by this quota.
			if _, err := q.clients[0].ProvisionInstance(&osb.ProvisionRequest{InstanceID: "q-other", AcceptsIncomplete: true,
				ServiceID: samplebroker.NoBindServiceID, PlanID: samplebroker.NoBindPlanID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
				t.Errorf("provision of a plan no quota counts: %v", err)
			}
			// A deprovision frees a slot.
			if _, err := q.clients[len(q.clients)-1].DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: firstAdmitted(errs), AcceptsIncomplete: true,
				ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID}); err != nil {
				t.Fatalf("deprovision: %v", err)
			}
			if _, err := q.clients[0].ProvisionInstance(&osb.ProvisionRequest{InstanceID: "q-after", AcceptsIncomplete: true,
				ServiceID: samplebroker.ServiceID, PlanID: samplebroker.PlanSyncID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID}); err != nil {
				t.Errorf("provision after a deprovision freed a slot: %v", err)
			}
		})
	}
}

// firstAdmitted is the id of the first provision that succeeded.
func firstAdmitted(errs []error) string {
	for i, err := range errs {
		if err == nil {
			return fmt.Sprintf("q-%02d", i)
		}
	}
	return ""
}

// ptrTo returns a pointer to v (config fields such as max_instances).
func ptrTo[T any](v T) *T { return &v }

// TestRouteQuota: a route's own quota counts the tenant's instances on
// that route's broker, on top of the tenant's quotas, and its refusal
// names it as "<broker>:<service>/<plan>".
func TestRouteQuota(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})
	bs := httptest.NewServer(sample)
	t.Cleanup(bs.Close)
	doc := strings.Replace(quotaYAML, "routes: [{broker: sample}]", "routes: [{broker: sample, quotas: [{plan: standard, max_instances: 1}]}]", 1)
	vars := map[string]string{"SAMPLE_URL": bs.URL, "SAMPLE_PASS": samplePass}
	cfg, err := config.Parse([]byte(doc), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(t.TempDir(), "state.db")}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{url: serveGateway(t, g)}
	c := e.client(t, prodSample, osb.Version2_14(), prodUser, prodPass)
	provision := func(id string) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: samplebroker.NoBindServiceID,
			PlanID: samplebroker.NoBindPlanID, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}
	if err := provision("r-1"); err != nil {
		t.Fatalf("first provision under the route's quota of 1: %v", err)
	}
	if err := provision("r-1"); err != nil {
		t.Errorf("a repeat of the provision the inventory holds is no new instance: %v", err)
	}
	err = provision("r-2")
	var he osb.HTTPStatusCodeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusUnprocessableEntity || he.Description == nil ||
		*he.Description != `quota "sample:*/standard" of tenant "cf-prod" is reached: it admits 1 instances of plan "standard" and the tenant holds 1; delete one first, or ask the operator to raise the quota` {
		t.Errorf("second provision: %v, want the route quota's 422", err)
	}
	if n := sample.Count("provision"); n != 2 {
		t.Errorf("the broker got %d provisions, want 2 (the first and its repeat)", n)
	}
}
