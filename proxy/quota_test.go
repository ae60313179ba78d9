package proxy

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy/internal/quota"
	"github.com/osb-gateway/osb-gateway/rules"
)

const quotaCatalog = `{"services": [
  {"id": "s-db", "name": "db", "description": "d", "bindable": true, "plans": [
    {"id": "p-small", "name": "small", "description": "d"}, {"id": "p-large", "name": "large", "description": "d"}]},
  {"id": "s-mq", "name": "mq", "description": "d", "bindable": true, "plans": [
    {"id": "p-mq-small", "name": "small", "description": "d"}]}]}`

// TestQuotaRules: each route passes its tenant's quotas, then its own,
// with the labels and the brokers counted, each broker once.
func TestQuotaRules(t *testing.T) {
	n := func(v int) *int { return &v }
	cfg := &config.Config{Tenants: []config.Tenant{{Name: "t",
		Quotas: []config.Quota{{Service: "db", MaxInstances: n(5)}, {Name: "all", MaxInstances: n(9)}},
		Routes: []config.Route{{Broker: "a", Prefix: "/t/a", Quotas: []config.Quota{{Plan: "large", MaxInstances: n(1)}}}, {Broker: "b", Prefix: "/t/b"},
			{Broker: "a", Prefix: "/t/a-again", IDs: &config.RouteIDs{Namespace: "again"}}}},
		{Name: "free", Routes: []config.Route{{Broker: "a", Prefix: "/free/a"}}}}}
	type row struct {
		Label   string
		Max     int
		Brokers []string
		Key     string
	}
	got := map[string][]row{}
	for prefix, qs := range quota.Rules(cfg) {
		for _, q := range qs {
			got[prefix] = append(got[prefix], row{q.Label, q.Max, q.Brokers, q.Lock.Key})
		}
	}
	want := map[string][]row{
		"/t/a": {{"db/*", 5, []string{"a", "b"}, "quota:t/db%2F%2A"}, {"all", 9, []string{"a", "b"}, "quota:t/all"}, {"a:*/large", 1, []string{"a"}, "quota:t/a:%2A%2Flarge"}},
		"/t/b": {{"db/*", 5, []string{"a", "b"}, "quota:t/db%2F%2A"}, {"all", 9, []string{"a", "b"}, "quota:t/all"}},
		// Broker a registered twice: its instances counted once.
		"/t/a-again": {{"db/*", 5, []string{"a", "b"}, "quota:t/db%2F%2A"}, {"all", 9, []string{"a", "b"}, "quota:t/all"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("quota rules (-want +got):\n%s", diff)
	}
}

// TestQuotaMatches: service and plan match by id, or by name in the
// catalog; without a catalog, by id only.
func TestQuotaMatches(t *testing.T) {
	ix, _, err := rules.NewIndex([]byte(quotaCatalog))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		service, plan string
		noCatalog     bool
		svcID, planID string
		want          bool
	}{
		{name: "any", svcID: "s-db", planID: "p-small", want: true},
		{name: "service by name", service: "db", svcID: "s-db", planID: "p-large", want: true},
		{name: "service by id", service: "s-db", svcID: "s-db", planID: "p-large", want: true},
		{name: "other service", service: "db", svcID: "s-mq", planID: "p-mq-small", want: false},
		{name: "plan name in any service", plan: "small", svcID: "s-mq", planID: "p-mq-small", want: true},
		{name: "service and plan", service: "db", plan: "small", svcID: "s-mq", planID: "p-mq-small", want: false},
		{name: "service and plan by id", service: "s-db", plan: "p-small", svcID: "s-db", planID: "p-small", want: true},
		{name: "name without catalog", service: "db", noCatalog: true, svcID: "s-db", planID: "p-small", want: false},
		{name: "id without catalog", plan: "p-small", noCatalog: true, svcID: "s-db", planID: "p-small", want: true},
		{name: "id the catalog lacks", service: "db", svcID: "s-gone", planID: "p-gone", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := &quota.Rule{Service: tt.service, Plan: tt.plan}
			use := ix
			if tt.noCatalog {
				use = nil
			}
			if got := q.Matches(use, tt.svcID, tt.planID); got != tt.want {
				t.Errorf("matches = %t, want %t", got, tt.want)
			}
		})
	}
}

// TestQuotaRefusal: the refusal names the quota, what it admits and what
// the tenant holds (and how much of that is still in flight), as a 422
// that Cloud Controller shows.
func TestQuotaRefusal(t *testing.T) {
	q := &quota.Rule{Tenant: "cf-prod", Label: "db/small", Service: "db", Plan: "small", Max: 5}
	for _, tc := range []struct {
		name               string
		recorded, inFlight int
		want               string
	}{
		{"recorded", 5, 0, `quota "db/small" of tenant "cf-prod" is reached: it admits 5 instances of service "db", plan "small" and the tenant holds 5; delete one first, or ask the operator to raise the quota`},
		{"in flight", 3, 2, `quota "db/small" of tenant "cf-prod" is reached: it admits 5 instances of service "db", plan "small" and the tenant holds 5 (2 of them still being provisioned, or not yet known to be gone after a failed provision); delete one first, or ask the operator to raise the quota`},
	} {
		if e := quota.Refusal(q, tc.recorded, tc.inFlight); e.Status != 422 || e.Description != tc.want {
			t.Errorf("%s: refusal %d %q, want 422 %q", tc.name, e.Status, e.Description, tc.want)
		}
	}
}

// TestQuotaBrokerRegisteredTwice: a broker the tenant reaches through two
// routes with ids of their own (routes[].ids) holds each instance once,
// whichever route made it: under a quota of 2, a provision through each
// route passes, and a third is refused naming the 2 the tenant holds.
// (Each instance used to be counted once per route: after one instance,
// every provision got 422 "admits 2 … the tenant holds 2".)
func TestQuotaBrokerRegisteredTwice(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	e.reload(t, `[{broker: b, prefix: /one, ids: {namespace: cf-one}}, {broker: b, prefix: /two, ids: {namespace: "`+idsNSTwo+`"}}]
    quotas: [{name: two, max_instances: 2}]`)
	provision := func(prefix, id, svc, plan string) (int, string) {
		t.Helper()
		res, body := e.call(t, prefix, "PUT", "/v2/service_instances/"+id,
			`{"service_id":"`+svc+`","plan_id":"`+plan+`","organization_guid":"org","space_guid":"space"}`)
		return res.StatusCode, body
	}
	if code, body := provision("/one", "i-one", oneServiceID, onePlanSyncID); code != http.StatusCreated {
		t.Fatalf("provision through /one: %d %s", code, body)
	}
	if code, body := provision("/two", "i-two", twoServiceID, twoPlanSyncID); code != http.StatusCreated {
		t.Errorf("provision through /two, the second of 2: %d %s, want 201", code, body)
	}
	want := `{"description":"quota \"two\" of tenant \"t1\" is reached: it admits 2 service instances and the tenant holds 2; delete one first, or ask the operator to raise the quota"}`
	if code, body := provision("/one", "i-three", oneServiceID, onePlanSyncID); code != http.StatusUnprocessableEntity || strings.TrimSpace(body) != want {
		t.Errorf("third provision: %d %s, want 422 %q", code, body, want)
	}
	if n := e.sample.Count(samplebroker.EndpointProvision); n != 2 {
		t.Errorf("the broker got %d provisions, want 2", n)
	}
}
