package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
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

// policyYAML holds the six examples of docs/policies.md, one for each need
// the issue names, and the two as written (size-cap, region-eu).
const policyYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: db
    url: ${BROKER_URL}
    api_version: {min: "2.14"}
    timeout: 10s
tenants:
  - name: cf-eu
    credentials: [{username: cf-user, password: cf-pass}]
    routes: [{broker: db}]
policies:
  # 1. A plan only for spaces whose name says production.
  - name: production-plan
    match: {endpoints: [provision, update], plans: [production]}
    require: "has(context.space_name) && glob(context.space_name, '*prod*')"
    message: "\"plan production is for spaces whose name says prod, not \" + context.space_name"
  # 2. A size parameter capped (the issue's example, as written).
  - name: size-cap
    match: {endpoints: [provision, update]}
    deny: "has(request.parameters.size) && request.parameters.size > 10"
    message: "\"size \" + string(request.parameters.size) + \" is over 10\""
  # 3. A region limited to the regions the tenant has paid for.
  - name: paid-regions
    match: {endpoints: [provision, update]}
    require: "!has(request.parameters.region) || request.parameters.region in (tenant == 'cf-eu' ? ['eu-1', 'eu-2'] : ['us-1'])"
    message: "\"region \" + string(request.parameters.region) + \" is not one tenant \" + tenant + \" has paid for\""
  # 4. Which parameters an update may change, per plan.
  - name: small-updates
    match: {endpoints: [update], plans: [small]}
    require: "request.parameters.all(k, k in ['size'])"
    message: "\"an update of plan small may change size only, not \" + request.parameters.filter(k, k != 'size').join(', ')"
  # 5. No new bindings to instances of a deprecated plan.
  - name: deprecated-binds
    match: {endpoints: [bind]}
    deny: "has(plan.metadata.deprecated) && plan.metadata.deprecated == true"
    message: "\"plan \" + plan.name + \" is deprecated: no new bindings\""
  # 6. Updates to a plan allowed to one team only.
  - name: large-team
    match: {endpoints: [update], plans: [large]}
    require: "identity.value.user_id in ['u-dba-1', 'u-dba-2']"
    message: "\"only the DBA team may update to plan large, not \" + string(identity.value.user_id)"
  # Set parameters (the issue's example, as written).
  - name: region-eu
    match: {endpoints: [provision]}
    force: {region: "'eu-1'"}
    defaults: {tags: "{'org': context.organization_guid}"}
`

// policyCatalog has a plan for each example: production, small, large
// and legacy (deprecated in its metadata).
const policyCatalog = `{"services":[{"id":"svc-db","name":"db","description":"d","bindable":true,"plan_updateable":true,"plans":[
{"id":"p-small","name":"small","description":"d","schemas":{"service_instance":{"create":{"parameters":{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"region":{"enum":["eu-1","eu-2","us-1"]}}}}}}},
{"id":"p-prod","name":"production","description":"d"},
{"id":"p-large","name":"large","description":"d"},
{"id":"p-legacy","name":"legacy","description":"d","metadata":{"deprecated":true}}]}]}`

// policyBroker answers like a broker that does everything at once.
func policyBroker(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.URL.Path == "/v2/catalog":
		io.WriteString(w, policyCatalog)
	case r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/service_bindings/"):
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"credentials":{"uri":"db://x"}}`)
	case r.Method == http.MethodPut:
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{}`)
	default:
		io.WriteString(w, `{}`)
	}
}

// TestPolicies: through a real gateway with the real OSB client, each of
// the six examples denies what it should and lets the rest through; a
// forced and a defaulted parameter reach the broker; the broker never sees
// a denied call; no lock is left; the audit record names the policy.
func TestPolicies(t *testing.T) {
	broker := osbtest.NewBroker(t, policyBroker)
	vars := map[string]string{"BROKER_URL": broker.URL}
	cfg, err := config.Parse([]byte(policyYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := backend.Open(store.Config{Backend: store.BackendMemory}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	recs := &records{}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st,
		Audit: &proxy.AuditOptions{Writer: recs}, BrokerTransport: suiteTransport})
	if err != nil {
		t.Fatalf("proxy.New: %v", err)
	}
	t.Cleanup(func() { g.Close(nil) })
	e := &env{url: serveGateway(t, g)}
	c := e.client(t, "/cf-eu/db", osb.Version2_14(), "cf-user", "cf-pass")

	ctx := func(space string) map[string]any {
		return map[string]any{"platform": "cloudfoundry", "organization_guid": "org-a", "space_guid": "space-1", "space_name": space}
	}
	who := func(user string) *osb.OriginatingIdentity {
		return &osb.OriginatingIdentity{Platform: "cloudfoundry", Value: fmt.Sprintf(`{"user_id":%q}`, user)}
	}
	provision := func(id, plan, space string, params map[string]any) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: id, ServiceID: "svc-db", PlanID: plan,
			OrganizationGUID: "org-a", SpaceGUID: "space-1", Context: ctx(space), Parameters: params})
		return err
	}
	update := func(id string, plan *string, user string, params map[string]any) error {
		_, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: id, ServiceID: "svc-db", PlanID: plan,
			Context: ctx("team-prod"), Parameters: params, OriginatingIdentity: who(user)})
		return err
	}
	bind := func(id, plan, binding string) error {
		_, err := c.Bind(&osb.BindRequest{InstanceID: id, BindingID: binding, ServiceID: "svc-db", PlanID: plan,
			Context: ctx("team-prod")})
		return err
	}
	large := "p-large"
	// The instances the updates and binds act on.
	for _, in := range []struct{ id, plan string }{{"small-1", "p-small"}, {"legacy-1", "p-legacy"}, {"big-1", "p-small"}} {
		if err := provision(in.id, in.plan, "team-prod", nil); err != nil {
			t.Fatalf("provision %s: %v", in.id, err)
		}
	}
	tests := []struct {
		name   string
		call   func() error
		policy string // "": let through
		says   string
	}{
		{"1 production plan in a dev space", func() error { return provision("prod-1", "p-prod", "dev", nil) },
			"production-plan", "plan production is for spaces whose name says prod, not dev"},
		{"1 production plan in a prod space", func() error { return provision("prod-2", "p-prod", "team-prod", nil) }, "", ""},
		{"2 size over the cap", func() error { return provision("size-1", "p-small", "team-prod", map[string]any{"size": 12}) },
			"size-cap", "size 12 is over 10"},
		{"2 size within the cap", func() error { return provision("size-2", "p-small", "team-prod", map[string]any{"size": 10}) }, "", ""},
		{"2 size over the cap on update", func() error { return update("small-1", nil, "u-dev", map[string]any{"size": 11}) },
			"size-cap", "size 11 is over 10"},
		{"3 a region not paid for", func() error { return provision("reg-1", "p-small", "team-prod", map[string]any{"region": "us-1"}) },
			"paid-regions", "region us-1 is not one tenant cf-eu has paid for"},
		{"3 a region paid for", func() error { return provision("reg-2", "p-small", "team-prod", map[string]any{"region": "eu-2"}) }, "", ""},
		{"4 an update of small changing backup", func() error { return update("small-1", nil, "u-dev", map[string]any{"size": 3, "backup": true}) },
			"small-updates", "an update of plan small may change size only, not backup"},
		{"4 an update of small changing size", func() error { return update("small-1", nil, "u-dev", map[string]any{"size": 3}) }, "", ""},
		{"5 a bind to a deprecated plan's instance", func() error { return bind("legacy-1", "p-legacy", "b-1") },
			"deprecated-binds", "plan legacy is deprecated: no new bindings"},
		{"5 a bind to a current plan's instance", func() error { return bind("small-1", "p-small", "b-2") }, "", ""},
		{"6 an update to large by another team", func() error { return update("big-1", &large, "u-dev", nil) },
			"large-team", "only the DBA team may update to plan large, not u-dev"},
		{"6 an update to large by the team", func() error { return update("big-1", &large, "u-dba-1", nil) }, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(broker.Requests())
			err := tt.call()
			seen := len(broker.Requests()) - before
			if tt.policy == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if seen != 1 {
					t.Errorf("the broker saw %d requests, want 1", seen)
				}
				return
			}
			var he osb.HTTPStatusCodeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || he.Description == nil {
				t.Fatalf("err = %v, want 400 from policy %s", err, tt.policy)
			}
			if want := fmt.Sprintf("denied by policy %q: %s", tt.policy, tt.says); *he.Description != want {
				t.Errorf("description = %q, want %q", *he.Description, want)
			}
			if seen != 0 {
				t.Errorf("the broker saw %d requests of a denied call", seen)
			}
			if locks, _ := st.List(context.Background(), store.ListFilter{}); len(locks) != 0 {
				t.Errorf("locks left: %+v", locks)
			}
			rec := recs.last()
			if rec.Outcome != proxy.OutcomeDenied || rec.Policy != tt.policy || rec.Status != http.StatusBadRequest || rec.Protection != proxy.ProtectionPolicy {
				t.Errorf("audit record: outcome %q policy %q status %d protection %q, want denied by %s",
					rec.Outcome, rec.Policy, rec.Status, rec.Protection, tt.policy)
			}
		})
	}

	// The provision of size-2 reached the broker with region forced and
	// tags defaulted; reg-2's region eu-2 became eu-1.
	for _, id := range []string{"size-2", "reg-2"} {
		params := sentParameters(t, broker, http.MethodPut, "/v2/service_instances/"+id)
		if params["region"] != "eu-1" || fmt.Sprint(params["tags"]) != "map[org:org-a]" {
			t.Errorf("%s reached the broker with parameters %v, want region forced to eu-1 and tags defaulted to {org: org-a}", id, params)
		}
	}
	// The platform's own tags are kept: defaults only fill what is missing.
	if err := provision("tags-1", "p-small", "team-prod", map[string]any{"tags": map[string]any{"team": "x"}}); err != nil {
		t.Fatal(err)
	}
	if p := sentParameters(t, broker, http.MethodPut, "/v2/service_instances/tags-1"); fmt.Sprint(p["tags"]) != "map[team:x]" {
		t.Errorf("tags-1 reached the broker with tags %v, want the platform's", p["tags"])
	}
	var changed *audit.Record
	for _, r := range recs.all() {
		if r.InstanceID == "size-2" && r.Endpoint == "provision" {
			changed = &r
		}
	}
	want := []audit.PolicyChange{{Policy: "region-eu", Parameter: "tags", Action: "default"}, {Policy: "region-eu", Parameter: "region", Action: "force"}}
	if changed == nil || fmt.Sprint(changed.PolicyChanges) != fmt.Sprint(want) {
		t.Errorf("size-2's audit record says the policies changed %+v, want %+v", changed, want)
	}
}

// TestPoliciesAsDocumented: the six examples of docs/policies.md are the
// policies TestPolicies runs, as written.
func TestPoliciesAsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/policies.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "<!-- policies-e2e -->\n```yaml\n")
	block, _, ok2 := strings.Cut(block, "```")
	_, want, _ := strings.Cut(policyYAML, "\npolicies:\n")
	if !ok || !ok2 || block != "policies:\n"+want {
		t.Errorf("docs/policies.md's examples are not TestPolicies' policies:\n%s\nwant\n%s", block, "policies:\n"+want)
	}
}

// sentParameters returns the parameters of the latest request with the
// method and path that reached the broker.
func sentParameters(t *testing.T, b *osbtest.Broker, method, path string) map[string]any {
	t.Helper()
	rs := b.Requests()
	for i := len(rs) - 1; i >= 0; i-- {
		if rs[i].Method == method && rs[i].URL.Path == path {
			var body struct{ Parameters map[string]any }
			raw, _ := io.ReadAll(rs[i].Body)
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
			return body.Parameters
		}
	}
	t.Fatalf("no %s %s reached the broker", method, path)
	return nil
}

func (r *records) last() audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.list[len(r.list)-1]
}

func (r *records) all() []audit.Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]audit.Record(nil), r.list...)
}

// A route migrating to a new broker sends a new instance's calls to the
// new broker's route: the route's policies apply there too.
func TestPoliciesHoldOnAMigratingRoute(t *testing.T) {
	me := newMigrateEnv(t)
	me.reload(t, `sample-v2, policies: [{name: freeze, match: {endpoints: [provision]}, deny: "true", message: "'no new instances'"}]`)
	_, err := me.provision("frozen-1", samplebroker.PlanSyncID)
	if err == nil || !strings.Contains(err.Error(), "freeze") || !strings.Contains(err.Error(), "no new instances") {
		t.Fatalf("provision on the migrating route: %v, want the policy's denial", err)
	}
	me.holds(t, "after the denied provision", samplebroker.Holdings{}, samplebroker.Holdings{})
}
