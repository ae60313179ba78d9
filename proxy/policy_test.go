package proxy

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/proxy/internal/policies"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// policyCatalog has a plan whose create schema allows regions eu-1 and
// eu-2 only.
var policyCatalog = []byte(`{"services":[{"id":"s1","name":"sample","description":"d","bindable":true,"plans":[` +
	`{"id":"p1","name":"sync","description":"d","schemas":{"service_instance":{"create":{"parameters":` +
	`{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","properties":{"region":{"enum":["eu-1","eu-2"]}}}}}}}]}]}`)

// policyGatewayYAML: tenant t1 reaches b1 with the policies given
// (indented for the route), t2 reaches it without any.
func policyGatewayYAML(policies string) string {
	return `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
brokers:
  - name: b1
    url: ${B1_URL}
    api_version: {min: "2.13", max: "2.17"}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes:
      - broker: b1
        policies:
` + policies + `
  - name: t2
    credentials: [{username: t2-user, password: t2-pass}]
    routes: [{broker: b1, prefix: /t2/b1}]
`
}

func policyBrokerAnswer(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/v2/catalog" {
		_, _ = w.Write(policyCatalog)
		return
	}
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{}`)
}

// TestPolicyStage: on the wire, a denial is a 400 OSB error naming the
// policy; a policy in report mode lets the call on and is counted; a
// forced parameter the plan's schema refuses is refused like the
// platform's own, before the broker; a route without policies is left
// alone.
func TestPolicyStage(t *testing.T) {
	b := osbtest.NewBroker(t, policyBrokerAnswer)
	cfg, err := config.Parse([]byte(policyGatewayYAML(`          - name: watch
            mode: report
            deny: "has(request.parameters.size) && request.parameters.size > 5"
          - name: cap
            deny: "has(request.parameters.size) && request.parameters.size > 10"
            message: "'size ' + string(request.parameters.size) + ' is over 10'"
          - name: mars
            match: {endpoints: [provision]}
            force: {region: "has(request.parameters.mars) ? 'mars' : 'eu-1'"}`)),
		config.Options{LookupEnv: func(string) (string, bool) { return b.URL, true }})
	if err != nil {
		t.Fatal(err)
	}
	m, err := registeredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	rw := &recordingWriter{}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Metrics: m, Audit: &AuditOptions{Writer: rw}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	provision := func(prefix, id, params string) (int, string) {
		body := `{"service_id":"s1","plan_id":"p1","organization_guid":"o","space_guid":"s","parameters":` + params + `}`
		user, pass := "t1-user", "t1-pass"
		if prefix == "/t2/b1" {
			user, pass = "t2-user", "t2-pass"
		}
		res, got := do(t, http.MethodPut, srv.URL+prefix+"/v2/service_instances/"+id, user, pass, "2.17", strings.NewReader(body))
		return res.StatusCode, got
	}
	seen := func() (n int) { // the broker's calls besides catalog fetches
		for _, r := range b.Requests() {
			if r.URL.Path != "/v2/catalog" {
				n++
			}
		}
		return n
	}
	tests := []struct {
		name, prefix, params string
		status               int
		body                 string // "": not checked
		reaches              bool
	}{
		{"denied", "/t1/b1", `{"size":11}`, 400, `{"description":"denied by policy \"cap\": size 11 is over 10"}` + "\n", false},
		{"reported", "/t1/b1", `{"size":7}`, 201, "", true},
		{"forced against the schema", "/t1/b1", `{"mars":true}`, 400, "", false},
		{"no policies on the route", "/t2/b1", `{"size":11}`, 201, "", true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := seen()
			status, body := provision(tt.prefix, fmt.Sprintf("i-%d", i), tt.params)
			if status != tt.status || tt.body != "" && body != tt.body {
				t.Errorf("answer %d %s, want %d %s", status, body, tt.status, tt.body)
			}
			if got := seen() > before; got != tt.reaches {
				t.Errorf("reached the broker: %v, want %v", got, tt.reaches)
			}
		})
	}
	// The audit records: the denial names its policy (its message, which
	// may quote values, withheld), the report the policy in report mode,
	// the forced parameter its policy.
	rw.mu.Lock()
	recs := slices.Clone(rw.recs)
	rw.mu.Unlock()
	if len(recs) != len(tests) {
		t.Fatalf("%d audit records, want %d", len(recs), len(tests))
	}
	denied, reported, forced := recs[0], recs[1], recs[2]
	if denied.Outcome != OutcomeDenied || denied.Policy != "cap" || fmt.Sprint(denied.PoliciesReported) != "[watch]" ||
		denied.Error == nil || denied.Error.Description != observe.DescribedByFindings {
		t.Errorf("the denial's record: outcome %q policy %q reported %v error %+v", denied.Outcome, denied.Policy, denied.PoliciesReported, denied.Error)
	}
	if reported.Outcome != OutcomeForwarded || reported.Policy != "" || fmt.Sprint(reported.PoliciesReported) != "[watch]" {
		t.Errorf("the report's record: outcome %q policy %q reported %v", reported.Outcome, reported.Policy, reported.PoliciesReported)
	}
	if fmt.Sprint(forced.PolicyChanges) != "[{mars region force}]" || forced.Outcome != OutcomeRejected {
		t.Errorf("the forced call's record: outcome %q changes %+v", forced.Outcome, forced.PolicyChanges)
	}
	if n := seriesValue(m, "osb_gateway_policy_denials_total", map[string]string{"tenant": "t1", "broker": "b1", "policy": "cap", "mode": "enforce"}); n != 1 {
		t.Errorf("denials of cap counted %v, want 1", n)
	}
	if n := seriesValue(m, "osb_gateway_policy_denials_total", map[string]string{"tenant": "t1", "broker": "b1", "policy": "watch", "mode": "report"}); n != 2 {
		t.Errorf("reports of watch counted %v, want 2 (size 7 and size 11)", n)
	}
	if ds := NewView(NewSwitch(g)).PolicyDenials(); len(ds) != 3 || ds[0].Policy != "watch" || !ds[0].Report {
		t.Errorf("recent denials %+v, want watch's report of size 7 first", ds)
	}
}

// TestPolicyStageLeftOut: without a policy on any route, the stage is not
// in the chain (nil middleware), so it costs nothing.
func TestPolicyStageLeftOut(t *testing.T) {
	cfg, err := config.Parse([]byte(twoTenantYAML), config.Options{LookupEnv: func(string) (string, bool) { return "http://127.0.0.1:9", true }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if g.policy != nil || policies.With(g.policy) != nil {
		t.Error("a gateway without policies has a policy stage")
	}
}

// benchPolicies are n policies of the kinds operators write: caps,
// organization and space rules, regions, globs; with sets, one more sets a
// parameter.
func benchPolicies(n int, sets bool) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "          - name: p-%d\n", i)
		switch i % 5 {
		case 0:
			fmt.Fprintf(&b, "            deny: \"has(request.parameters.size) && request.parameters.size > %d\"\n", 100+i)
			b.WriteString("            message: \"'size ' + string(request.parameters.size) + ' is too big'\"\n")
		case 1:
			fmt.Fprintf(&b, "            require: \"context.organization_guid != 'blocked-%d'\"\n", i)
		case 2:
			fmt.Fprintf(&b, "            deny: \"glob(context.space_name, 'forbidden-%d-*')\"\n", i)
		case 3:
			fmt.Fprintf(&b, "            match: {endpoints: [provision, update]}\n            deny: \"request.parameters.region in ['r-%d', 'x-%d']\"\n", i, i)
		case 4:
			fmt.Fprintf(&b, "            match: {endpoints: [provision]}\n            require: \"tenant == 't1' && plan.name == 'sync'\"\n")
		}
	}
	if sets {
		b.WriteString("          - name: tag\n            defaults: {tags: \"{'org': context.organization_guid}\"}\n")
	}
	return b.String()
}

// policyBody is the provision the benchmark sends.
const policyBody = `{"service_id":"s1","plan_id":"p1","organization_guid":"o","space_guid":"s",` +
	`"context":{"platform":"cloudfoundry","organization_guid":"o","space_guid":"s","space_name":"dev"},"parameters":{"size":5,"region":"eu-1"}}`

// policyChain is the chain of a provision up to the policy stage: scope,
// a prefill (route, version, body), classify, validate, then mw.
func policyChain(g *Gateway, rt *route, body []byte, mw Middleware) http.Handler {
	prefill := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			s.Route, s.Tenant, s.Broker, s.Path = rt, auth.TenantOf(rt).Name, upstream.Of(rt).Name, strings.TrimPrefix(r.URL.Path, rt.Prefix)
			s.Version, s.Forward, s.Body = upstream.Of(rt).Max, upstream.Of(rt).MaxString, body
			next.ServeHTTP(w, r)
		})
	}
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	return Stack(terminal, withScope(time.Now), prefill, request.WithClassify(), request.WithValidate(g.catalogs, g.guard.St, slog.New(slog.DiscardHandler)), mw)
}

// BenchmarkPolicyStage: a provision through validate and the policy
// stage, on a route without policies (the stage is in the chain for
// another route), on a route with 20 that let it through, and with a 21st
// that defaults a parameter (the body rewritten and checked against the
// schema again); "none" is the chain without the stage.
// docs/performance.md cites the figures.
func BenchmarkPolicyStage(b *testing.B) {
	g := benchPolicyGateway(b, benchPolicies(20, false))
	gSets := benchPolicyGateway(b, benchPolicies(20, true))
	with, withSets := anyRoute(g), anyRoute(gSets)
	without := newRoute("/t2/b1", mustTenant(b, &g.cfg.Tenants[1]), upstream.Of(with))
	without.Filter = with.Filter
	for _, bc := range []struct {
		name string
		g    *Gateway
		rt   *route
		mw   Middleware
	}{
		{"none", g, with, nil},
		{"route without policies", g, without, policies.With(g.policy)},
		{"20 policies", g, with, policies.With(g.policy)},
		{"20 policies and a default", gSets, withSets, policies.With(gSets.policy)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodPut, bc.rt.Prefix+"/v2/service_instances/i-1", nil)
			id := "cloudfoundry " + base64.StdEncoding.EncodeToString([]byte(`{"user_id":"u-1"}`))
			r.Header.Set("X-Broker-API-Originating-Identity", id)
			benchServe(b, policyChain(bc.g, bc.rt, []byte(policyBody), bc.mw), r)
		})
	}
}

// anyRoute is a route of g's with policies.
func anyRoute(g *Gateway) *route {
	if len(g.policy.Routes) == 0 {
		return nil
	}
	return g.policy.Routes[0]
}

// benchPolicyGateway is a gateway for policyGatewayYAML(policies) with its
// catalog fetched.
func benchPolicyGateway(b *testing.B, policies string) *Gateway {
	up := httptest.NewServer(http.HandlerFunc(policyBrokerAnswer))
	b.Cleanup(up.Close)
	cfg, err := config.Parse([]byte(policyGatewayYAML(policies)), config.Options{LookupEnv: func(string) (string, bool) { return up.URL, true }})
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { g.Close(nil) })
	if err := g.WarmCatalogs(context.Background()); err != nil {
		b.Fatal(err)
	}
	return g
}

// FuzzPolicyStage sends random calls through the policy stage with
// policies that read every variable: no panic, and every answer is the
// terminal's 200 or an OSB error.
func FuzzPolicyStage(f *testing.F) {
	up := httptest.NewServer(http.HandlerFunc(policyBrokerAnswer))
	f.Cleanup(up.Close)
	specs := `          - name: all
            deny: "request.parameters.size > 3 || context.space_name == 'x' || identity.value.user_id == 'u' || service.name == plan.name || instance.exists || size(previous_values) > 1 || maintenance_info.version == '1' || call.binding_id == 'b' || glob(username, 'a*') || daytime(now, 'UTC') == '00:00' || quantity(request.parameters.disk) > 5 || num(request.parameters.n) > 1.5"
            message: "'no: ' + string(request.parameters.size)"
          - name: set
            force: {a: "request.parameters", b: "context", c: "[now, plan.metadata]"}
            defaults: {d: "instance"}`
	cfg, err := config.Parse([]byte(policyGatewayYAML(specs)), config.Options{LookupEnv: func(string) (string, bool) { return up.URL, true }})
	if err != nil {
		f.Fatal(err)
	}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { g.Close(nil) })
	rt := anyRoute(g)
	for _, seed := range []string{policyBody, `{}`, `{"parameters":{"size":"big","disk":"2Gi","n":"x"}}`, `{"parameters":[1]}`, `nul`, ``,
		`{"service_id":"s1","plan_id":"p1","previous_values":{"plan_id":"p1"},"maintenance_info":{"version":1}}`} {
		f.Add(uint8(0), "i-1", seed, "cloudfoundry eyJ1c2VyX2lkIjoidSJ9")
	}
	f.Fuzz(func(t *testing.T, kind uint8, id, body, identity string) {
		methods := []string{http.MethodPut, http.MethodPatch, http.MethodDelete}
		path := "/t1/b1/v2/service_instances/" + url.PathEscape(id)
		if kind&4 != 0 {
			path += "/service_bindings/b"
		}
		r := httptest.NewRequest(methods[int(kind%4)%3], "http://x"+path+"?service_id=s1&plan_id=p1", bytes.NewReader([]byte(body)))
		r.Header.Set("X-Broker-API-Originating-Identity", identity)
		w := httptest.NewRecorder()
		policyChain(g, rt, []byte(body), policies.With(g.policy)).ServeHTTP(w, r)
		if w.Code != 200 && !strings.HasPrefix(w.Body.String(), "{") {
			t.Fatalf("answer %d %q", w.Code, w.Body.String())
		}
	})
}

// TestPolicyReloadKeepsPrograms: a reload keeps the compiled programs of
// the policies that did not change, and the recent denials.
func TestPolicyReloadKeepsPrograms(t *testing.T) {
	parse := func(policies string) *config.Config {
		cfg, err := config.Parse([]byte(policyGatewayYAML(policies)), config.Options{LookupEnv: func(string) (string, bool) { return "http://127.0.0.1:9", true }})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	const kept, changed = "          - {name: kept, deny: \"tenant == 'x'\"}\n", "          - {name: changed, deny: \"tenant == '%s'\"}\n"
	g1, err := New(parse(kept+fmt.Sprintf(changed, "a")), Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := New(parse(kept+fmt.Sprintf(changed, "b")), Options{Logger: slog.New(slog.DiscardHandler), Previous: g1})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := anyRoute(g1), anyRoute(g2)
	l1, l2 := policies.Of(p1).Policies(), policies.Of(p2).Policies()
	if l1[0] != l2[0] || l1[1] == l2[1] || g1.policy.Recent != g2.policy.Recent {
		t.Errorf("after a reload: unchanged policy kept %v, changed policy kept %v, recent denials kept %v",
			l1[0] == l2[0], l1[1] == l2[1], g1.policy.Recent == g2.policy.Recent)
	}
}
