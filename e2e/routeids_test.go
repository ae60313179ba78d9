package e2e

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// routeIDsYAML registers the sample broker twice with one platform: two
// routes of tenant cf-prod, each showing ids of its own namespace (one a
// name, one a UUID), and once more for tenant cf-dev with the broker's own
// ids.
const routeIDsYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: sample
    url: ${SAMPLE_URL}
    username: sample-user
    password: ${SAMPLE_PASS}
    api_version: {min: "2.14"}
    timeout: 10s
    poll: {min_interval: -1s}
tenants:
  - name: cf-prod
    credentials: [{username: cf-prod-user, password: cf-prod-pass}]
    routes:
      - {broker: sample, prefix: /cf-prod/sample-a, ids: {namespace: cf-prod-a}}
      - {broker: sample, prefix: /cf-prod/sample-b, ids: {namespace: "9d1c7a52-6f0e-4c1b-a3d2-5e8f7b6a4c30"}}
  - name: cf-dev
    credentials: [{username: cf-dev-user, password: cf-dev-pass}]
    routes: [{broker: sample}]
`

// bodyTap records the query and body of every request before h serves
// it: what the broker was sent.
type bodyTap struct {
	h  http.Handler
	mu sync.Mutex
	rs []string // "METHOD path?query body"
}

func (b *bodyTap) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	b.mu.Lock()
	b.rs = append(b.rs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery+" "+string(body))
	b.mu.Unlock()
	b.h.ServeHTTP(w, r)
}

func (b *bodyTap) requests() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.rs...)
}

// registration is what one registration of the broker shows the platform:
// the ids of the service "sample" and its plans.
type registration struct {
	prefix               string
	service, sync, async string
	client               osb.Client
	instance             string
}

// TestRouteIDsOneBrokerRegisteredTwice: the sample broker registered twice
// with one platform through two routes with namespaces of their own. Each
// registration's catalog shows ids of its own (neither the other's nor the
// broker's); both provision (asynchronously, polled), fetch, bind, fetch
// the binding, unbind and deprovision with those ids through the real OSB
// client; GET instance shows each registration's own ids; and the broker
// is sent its own ids only.
func TestRouteIDsOneBrokerRegisteredTwice(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: asyncDelay, Now: clk.Now})
	sent := &bodyTap{h: sample}
	srv := httptest.NewServer(sent)
	t.Cleanup(srv.Close)
	vars := map[string]string{"SAMPLE_URL": srv.URL, "SAMPLE_PASS": samplePass}
	cfg, err := config.Parse([]byte(routeIDsYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{clock: clk, sample: sample, gateway: &tap{h: g}}
	e.url = serveGateway(t, e.gateway)

	regs := []*registration{{prefix: "/cf-prod/sample-a", instance: "i-a"}, {prefix: "/cf-prod/sample-b", instance: "i-b"}, {prefix: "/cf-dev/sample", instance: "i-raw"}}
	seen := map[string]string{}
	for _, r := range regs {
		user, pass := prodUser, prodPass
		if strings.HasPrefix(r.prefix, "/cf-dev") {
			user, pass = devUser, devPass
		}
		r.client = e.client(t, r.prefix, osb.Version2_14(), user, pass)
		cat, err := r.client.GetCatalog()
		if err != nil {
			t.Fatalf("%s catalog: %v", r.prefix, err)
		}
		for _, s := range cat.Services {
			if s.Name != samplebroker.ServiceName {
				continue
			}
			r.service = s.ID
			for _, p := range s.Plans {
				switch p.Name {
				case samplebroker.PlanSyncName:
					r.sync = p.ID
				case samplebroker.PlanAsyncName:
					r.async = p.ID
				}
			}
		}
		for _, id := range []string{r.service, r.sync, r.async} {
			if id == "" {
				t.Fatalf("%s: the catalog lacks the sample service or a plan: %+v", r.prefix, cat)
			}
			if other, dup := seen[id]; dup {
				t.Errorf("id %s shown by %s and %s: each registration needs ids of its own", id, other, r.prefix)
			}
			seen[id] = r.prefix
		}
	}
	if raw := regs[2]; raw.service != samplebroker.ServiceID || raw.sync != samplebroker.PlanSyncID {
		t.Errorf("the registration without ids shows %s %s, want the broker's ids", raw.service, raw.sync)
	}

	for _, r := range regs {
		idsLifecycle(t, e, r)
	}

	derived := []string{regs[0].service, regs[0].sync, regs[0].async, regs[1].service, regs[1].sync, regs[1].async}
	own := 0
	for _, req := range sent.requests() {
		for _, id := range derived {
			if strings.Contains(req, id) {
				t.Errorf("the broker was sent a derived id %s: %s", id, req)
			}
		}
		if strings.Contains(req, samplebroker.ServiceID) {
			own++
		}
	}
	if own < 3*6 {
		t.Errorf("%d requests to the broker carried its service id, want at least 18 (6 per registration): %q", own, sent.requests())
	}
}

// idsLifecycle provisions (async, polled), fetches, binds, fetches the
// binding, unbinds and deprovisions (async, polled) through r's
// registration with the ids it shows.
func idsLifecycle(t *testing.T, e *env, r *registration) {
	t.Helper()
	c := r.client
	prov, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: r.instance, AcceptsIncomplete: true, ServiceID: r.service,
		PlanID: r.async, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
	if err != nil {
		t.Fatalf("%s provision: %v", r.prefix, err)
	}
	if !prov.Async {
		t.Fatalf("%s provision of the async plan answered synchronously", r.prefix)
	}
	answers, _ := e.poll(t, func() (*osb.LastOperationResponse, error) {
		return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: r.instance, ServiceID: &r.service, PlanID: &r.async, OperationKey: prov.OperationKey})
	})
	if last := answers[len(answers)-1]; last.State != osb.StateSucceeded {
		t.Fatalf("%s provision ended %q", r.prefix, last.State)
	}
	got, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: r.instance})
	if err != nil {
		t.Fatalf("%s GET instance: %v", r.prefix, err)
	}
	if got.ServiceID != r.service || got.PlanID != r.async {
		t.Errorf("%s GET instance shows %s %s, want the registration's own ids %s %s", r.prefix, got.ServiceID, got.PlanID, r.service, r.async)
	}
	bindingID, appGUID := r.instance+"-binding", "app-"+r.instance
	bound, err := c.Bind(&osb.BindRequest{InstanceID: r.instance, BindingID: bindingID, ServiceID: r.service, PlanID: r.async,
		BindResource: &osb.BindResource{AppGUID: &appGUID}})
	if err != nil {
		t.Fatalf("%s bind: %v", r.prefix, err)
	}
	if len(bound.Credentials) == 0 {
		t.Errorf("%s bind: no credentials", r.prefix)
	}
	if _, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: r.instance, BindingID: bindingID}); err != nil {
		t.Errorf("%s GET binding: %v", r.prefix, err)
	}
	if _, err := c.Unbind(&osb.UnbindRequest{InstanceID: r.instance, BindingID: bindingID, ServiceID: r.service, PlanID: r.async}); err != nil {
		t.Fatalf("%s unbind: %v", r.prefix, err)
	}
	dep, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: r.instance, AcceptsIncomplete: true, ServiceID: r.service, PlanID: r.async})
	if err != nil {
		t.Fatalf("%s deprovision: %v", r.prefix, err)
	}
	if dep.Async {
		_, gone := e.poll(t, func() (*osb.LastOperationResponse, error) {
			return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: r.instance, ServiceID: &r.service, PlanID: &r.async, OperationKey: dep.OperationKey})
		})
		_ = gone // a finished deprovision is "succeeded" or 410 Gone: both end it
	}
}
