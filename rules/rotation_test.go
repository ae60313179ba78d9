package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// rotationCases are CheckRotation's rows against testdata/requests/catalog.json,
// where p-small is binding_rotatable and p-large is not.
var rotationCases = []struct {
	name              string
	platform, broker  string
	body              string
	want              []string
	withoutTheCatalog bool
}{
	{name: "rotatable_plan", platform: "2.17", broker: "2.17",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "predecessor_binding_id": "b-0"}`},
	{name: "not_rotatable", platform: "2.17", broker: "2.17",
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "predecessor_binding_id": "b-0"}`,
		want: []string{"request.catalog.not_rotatable"}},
	{name: "not_rotatable_bridged_for_a_2_15_broker", platform: "2.17", broker: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "predecessor_binding_id": "b-0"}`},
	{name: "not_rotatable_bridged_for_a_2_8_broker", platform: "2.17", broker: "2.8",
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "predecessor_binding_id": "b-0"}`},
	{name: "no_rotation", platform: "2.17", broker: "2.17",
		body: `{"service_id": "s-mysql", "plan_id": "p-large"}`},
	{name: "extension_field_at_2_16", platform: "2.16", broker: "2.16",
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "predecessor_binding_id": "b-0"}`},
	{name: "unknown_plan_is_the_catalog_rules_to_say", platform: "2.17", broker: "2.17",
		body: `{"service_id": "s-mysql", "plan_id": "p-9", "predecessor_binding_id": "b-0"}`},
	{name: "without_the_catalog", platform: "2.17", broker: "2.17", withoutTheCatalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "predecessor_binding_id": "b-0"}`},
}

func TestCheckRotation(t *testing.T) {
	var names []string
	for _, tt := range rotationCases {
		t.Run(tt.name, func(t *testing.T) {
			v := osb.MustParseVersion(tt.platform)
			req, vs := CheckRequest(bindCall, v, []byte(tt.body), nil)
			if len(vs) > 0 {
				t.Fatalf("CheckRequest = %v", vs)
			}
			var cat CatalogView = testCatalog()
			if tt.withoutTheCatalog {
				cat = nil
			}
			got := CheckRotation(bindCall, v, osb.MustParseVersion(tt.broker), req, cat)
			if diff := cmp.Diff(tt.want, ruleIDs(got)); diff != "" {
				t.Errorf("CheckRotation rules mismatch (-want +got):\n%s\nviolations: %+v", diff, got)
			}
			if len(tt.want) > 0 {
				checkGolden(t, "rotation", tt.name, got)
			}
		})
		if len(tt.want) > 0 {
			names = append(names, tt.name)
		}
	}
	names = append(names, "unknown_predecessor")
	t.Run("unknown_predecessor", func(t *testing.T) {
		checkGolden(t, "rotation", "unknown_predecessor", []Violation{UnknownPredecessor(bindCall, "b-0")})
	})
	checkNoStrayGoldens(t, "rotation", names)
}

func TestCheckRotationOtherCalls(t *testing.T) {
	req := &Request{ServiceID: "s-mysql", PlanID: "p-large", PredecessorBindingID: "b-0"}
	v := osb.MustParseVersion("2.17")
	for _, c := range []Call{provisionCall, updateCall, {Endpoint: Unbind, InstanceID: "i-1", BindingID: "b-1"}} {
		if vs := CheckRotation(c, v, v, req, testCatalog()); vs != nil {
			t.Errorf("CheckRotation(%s) = %v, want none", c.Endpoint, vs)
		}
	}
	if vs := CheckRotation(bindCall, v, v, nil, testCatalog()); vs != nil {
		t.Errorf("CheckRotation(no request) = %v, want none", vs)
	}
}
