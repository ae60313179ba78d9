package rules

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// requestCase is one row of the request tables: a call, its version and
// body, and the rule ids it must break, in order. Rows that break rules
// have a golden refusal in testdata/requests/<name>.golden.
type requestCase struct {
	name    string
	call    Call
	version string
	body    string
	catalog bool // check against testdata/requests/catalog.json
	want    []string
}

var (
	provisionCall = Call{Endpoint: Provision, InstanceID: "i-1", AcceptsIncomplete: true}
	updateCall    = Call{Endpoint: Update, InstanceID: "i-1", AcceptsIncomplete: true}
	bindCall      = Call{Endpoint: Bind, InstanceID: "i-1", BindingID: "b-1"}
)

// cfProvision is a provision body as Cloud Controller sends it at 2.15.
const cfProvision = `{
  "service_id": "s-mysql",
  "plan_id": "p-small",
  "organization_guid": "org-1",
  "space_guid": "space-1",
  "context": {"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1", "instance_name": "db"},
  "parameters": {"size": 10},
  "maintenance_info": {"version": "1.1.0"}
}`

// requestShapeCases are the rules on the body as a whole.
var requestShapeCases = []requestCase{
	{name: "body_empty", call: provisionCall, version: "2.15", body: ``, want: []string{"request.body.missing"}},
	{name: "body_whitespace", call: bindCall, version: "2.15", body: " \n\t", want: []string{"request.body.missing"}},
	{name: "body_syntax", call: provisionCall, version: "2.15", body: `{"service_id": "s-mysql", plan_id: "p"}`,
		want: []string{"request.body.syntax"}},
	{name: "body_truncated", call: provisionCall, version: "2.15", body: `{"service_id": "s-mysql"`,
		want: []string{"request.body.syntax"}},
	{name: "body_trailing_data", call: updateCall, version: "2.15", body: `{"service_id": "s-mysql"} {}`,
		want: []string{"request.body.syntax"}},
	{name: "body_array", call: provisionCall, version: "2.15", body: `[{"service_id": "s-mysql"}]`,
		want: []string{"request.body.not_object"}},
	{name: "body_null", call: updateCall, version: "2.15", body: `null`, want: []string{"request.body.not_object"}},
	{name: "body_string", call: bindCall, version: "2.15", body: `"plan_id"`, want: []string{"request.body.not_object"}},
	{name: "body_duplicate_field", call: bindCall, version: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "plan_id": "p-large"}`,
		want: []string{"request.body.duplicate_field"}},
	{name: "body_duplicate_escaped_key", call: bindCall, version: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "pl\u0061n_id": "p-large"}`,
		want: []string{"request.body.duplicate_field"}},
	// A Go broker reads "PLAN_ID" as plan_id (the last one winning), others
	// ignore it: the gateway would vouch for the plan it did not act on.
	{name: "body_case_variant_beside_field", call: bindCall, version: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "PLAN_ID": "p-large"}`,
		want: []string{"request.body.ambiguous_field"}},
	// Parameters the schema never sees, which a Go broker would take.
	{name: "body_case_variant_parameters", call: provisionCall, version: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "organization_guid": "o", "space_guid": "s", "Parameters": {"size": "huge"}}`,
		want: []string{"request.body.ambiguous_field"}},
	// The long s folds to s as encoding/json folds it.
	{name: "body_case_variant_unicode_fold", call: bindCall, version: "2.15",
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "\u017fervice_id": "s-other"}`,
		want: []string{"request.body.ambiguous_field"}},
}

// requestProvisionCases are the provision rules without the catalog.
var requestProvisionCases = []requestCase{
	{name: "provision_cf_2_15", call: provisionCall, version: "2.15", body: cfProvision},
	{name: "provision_legacy_2_8", call: provisionCall, version: "2.8",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s"}`},
	{name: "provision_unknown_fields_pass", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "x_vendor": [1, 2]}`},
	{name: "provision_context_only", call: provisionCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "context": {"platform": "cloudfoundry", "organization_guid": "o", "space_guid": "s"}}`},
	{name: "provision_context_only_at_2_12", call: provisionCall, version: "2.12",
		body: `{"service_id": "s", "plan_id": "p", "context": {"platform": "cloudfoundry", "organization_guid": "o", "space_guid": "s"}}`,
		want: []string{"request.organization_guid.required", "request.space_guid.required"}},
	{name: "provision_context_without_space", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "context": {"platform": "kubernetes", "organization_guid": "o"}}`,
		want: []string{"request.space_guid.required"}},
	{name: "provision_empty_object", call: provisionCall, version: "2.15", body: `{}`,
		want: []string{"request.service_id.required", "request.plan_id.required",
			"request.organization_guid.required", "request.space_guid.required"}},
	{name: "provision_empty_ids", call: provisionCall, version: "2.15",
		body: `{"service_id": "", "plan_id": "", "organization_guid": "o", "space_guid": "s"}`,
		want: []string{"request.service_id.required", "request.plan_id.required"}},
	{name: "provision_null_ids", call: provisionCall, version: "2.15",
		body: `{"service_id": null, "plan_id": "p", "organization_guid": "o", "space_guid": "s"}`,
		want: []string{"request.service_id.required"}},
	{name: "provision_uppercase_key", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "PLAN_ID": "p", "organization_guid": "o", "space_guid": "s"}`,
		want: []string{"request.body.ambiguous_field", "request.plan_id.required"}},
	{name: "provision_id_wrong_type", call: provisionCall, version: "2.15",
		body: `{"service_id": 42, "plan_id": ["p"], "organization_guid": "o", "space_guid": "s"}`,
		want: []string{"request.service_id.type", "request.plan_id.type"}},
	{name: "provision_parameters_array", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "parameters": [1]}`,
		want: []string{"request.parameters.type"}},
	{name: "provision_parameters_null_pass", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "parameters": null}`},
	{name: "provision_parameters_unknown_at_2_4", call: provisionCall, version: "2.4",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "parameters": "x"}`},
	{name: "provision_context_string", call: provisionCall, version: "2.12",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "context": "cf"}`,
		want: []string{"request.context.type"}},
	{name: "provision_context_unknown_at_2_11", call: provisionCall, version: "2.11",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "context": "cf"}`},
	{name: "provision_maintenance_info_empty_pass", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "maintenance_info": {}}`},
	{name: "provision_maintenance_info_no_version", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "maintenance_info": {"description": "OS update"}}`,
		want: []string{"request.maintenance_info.version.required"}},
	{name: "provision_maintenance_info_version_number", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "maintenance_info": {"version": 1}}`,
		want: []string{"request.maintenance_info.version.type"}},
	{name: "provision_maintenance_info_string", call: provisionCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "maintenance_info": "1.0.0"}`,
		want: []string{"request.maintenance_info.type"}},
	{name: "provision_maintenance_info_unknown_at_2_14", call: provisionCall, version: "2.14",
		body: `{"service_id": "s", "plan_id": "p", "organization_guid": "o", "space_guid": "s", "maintenance_info": "1.0.0"}`},
}

// requestUpdateBindCases are the update, bind, deprovision and unbind rules
// without the catalog.
var requestUpdateBindCases = []requestCase{
	{name: "update_cf_2_15", call: updateCall, version: "2.15", body: `{"service_id": "s", "plan_id": "p2",
		"context": {"platform": "cloudfoundry"}, "parameters": {"a": 1},
		"previous_values": {"service_id": "s", "plan_id": "p1", "organization_id": "o", "space_id": "s",
		"maintenance_info": {"version": "1.0.0"}}, "maintenance_info": {"version": "1.1.0"}}`},
	{name: "update_missing_service_id", call: updateCall, version: "2.15", body: `{"plan_id": "p"}`,
		want: []string{"request.service_id.required"}},
	{name: "update_service_id_optional_at_2_5", call: updateCall, version: "2.5", body: `{"plan_id": "p"}`},
	{name: "update_plan_id_required_at_2_4", call: updateCall, version: "2.4", body: `{}`,
		want: []string{"request.plan_id.required"}},
	{name: "update_parameters_only", call: updateCall, version: "2.15", body: `{"service_id": "s", "parameters": {"a": 1}}`},
	{name: "update_plan_id_empty", call: updateCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "", "previous_values": {"plan_id": ""}}`,
		want: []string{"request.plan_id.empty", "request.previous_values.plan_id.empty"}},
	{name: "update_plan_id_empty_before_2_12", call: updateCall, version: "2.11", body: `{"service_id": "s", "plan_id": ""}`},
	{name: "update_previous_values_array", call: updateCall, version: "2.15",
		body: `{"service_id": "s", "previous_values": [{"plan_id": "p"}]}`,
		want: []string{"request.previous_values.type"}},
	{name: "update_previous_plan_id_number", call: updateCall, version: "2.15",
		body: `{"service_id": "s", "previous_values": {"plan_id": 7}}`,
		want: []string{"request.previous_values.plan_id.type"}},
	{name: "update_previous_maintenance_info_no_version", call: updateCall, version: "2.15",
		body: `{"service_id": "s", "previous_values": {"maintenance_info": {"description": "x"}}}`,
		want: []string{"request.previous_values.maintenance_info.version.required"}},
	{name: "bind_cf_2_15", call: bindCall, version: "2.15", body: `{"service_id": "s", "plan_id": "p", "app_guid": "a",
		"bind_resource": {"app_guid": "a"}, "context": {"platform": "cloudfoundry"}, "parameters": {}}`},
	{name: "bind_service_key", call: bindCall, version: "2.15", body: `{"service_id": "s", "plan_id": "p"}`},
	{name: "bind_app_guid_required_at_2_3", call: bindCall, version: "2.3", body: `{"service_id": "s", "plan_id": "p"}`,
		want: []string{"request.app_guid.required"}},
	{name: "bind_app_guid_optional_at_2_6", call: bindCall, version: "2.6", body: `{"service_id": "s", "plan_id": "p"}`},
	{name: "bind_app_guid_empty", call: bindCall, version: "2.15", body: `{"service_id": "s", "plan_id": "p", "app_guid": ""}`,
		want: []string{"request.app_guid.empty"}},
	{name: "bind_resource_array", call: bindCall, version: "2.15", body: `{"service_id": "s", "plan_id": "p", "bind_resource": ["a"]}`,
		want: []string{"request.bind_resource.type"}},
	{name: "bind_resource_app_guid_number", call: bindCall, version: "2.15",
		body: `{"service_id": "s", "plan_id": "p", "bind_resource": {"app_guid": 1, "route": true}}`,
		want: []string{"request.bind_resource.app_guid.type", "request.bind_resource.route.type"}},
	{name: "bind_context_unknown_at_2_12", call: bindCall, version: "2.12", body: `{"service_id": "s", "plan_id": "p", "context": 1}`},
	{name: "bind_context_number_at_2_13", call: bindCall, version: "2.13", body: `{"service_id": "s", "plan_id": "p", "context": 1}`,
		want: []string{"request.context.type"}},
	{name: "bind_rotation_2_17", call: bindCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": "b-0"}`},
	{name: "bind_predecessor_binding_id_number", call: bindCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": 7}`,
		want: []string{"request.predecessor_binding_id.type"}},
	{name: "bind_predecessor_binding_id_empty", call: bindCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": ""}`,
		want: []string{"request.predecessor_binding_id.empty"}},
	{name: "bind_predecessor_binding_id_self", call: bindCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": "b-1"}`,
		want: []string{"request.predecessor_binding_id.self"}},
	{name: "bind_predecessor_binding_id_unknown_at_2_16", call: bindCall, version: "2.16",
		body: `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": 7}`},
	{name: "bind_predecessor_binding_id_case_variant", call: bindCall, version: "2.17",
		body: `{"service_id": "s", "plan_id": "p", "Predecessor_Binding_ID": "b-0"}`,
		want: []string{"request.body.ambiguous_field"}},
	{name: "deprovision_query", call: Call{Endpoint: Deprovision, InstanceID: "i-1", ServiceID: "s", PlanID: "p"}, version: "2.15"},
	{name: "deprovision_missing_service_id", call: Call{Endpoint: Deprovision, InstanceID: "i-1", PlanID: "p"}, version: "2.15",
		want: []string{"request.query.service_id.required"}},
	{name: "unbind_missing_query", call: Call{Endpoint: Unbind, InstanceID: "i-1", BindingID: "b-1"}, version: "2.8",
		want: []string{"request.query.service_id.required", "request.query.plan_id.required"}},
	{name: "get_instance_has_no_rules", call: Call{Endpoint: GetInstance, InstanceID: "i-1"}, version: "2.15", body: `garbage`},
	{name: "last_operation_has_no_rules", call: Call{Endpoint: InstanceLastOperation, InstanceID: "i-1"}, version: "2.15"},
}

// cmpIgnoreFields compares Requests without their raw members.
var cmpIgnoreFields = cmpopts.IgnoreFields(Request{}, "Fields")

// allRequestCases are every request table, for the golden files.
func allRequestCases() []requestCase {
	var all []requestCase
	for _, cases := range [][]requestCase{requestShapeCases, requestProvisionCases, requestUpdateBindCases, requestCatalogCases} {
		all = append(all, cases...)
	}
	return all
}

// runRequestCase checks one row: its rule ids and, when it breaks rules,
// its golden refusal.
func runRequestCase(t *testing.T, tt requestCase) {
	t.Helper()
	var cat CatalogView
	if tt.catalog {
		cat = testCatalog()
	}
	req, vs := CheckRequest(tt.call, osb.MustParseVersion(tt.version), []byte(tt.body), cat)
	if diff := cmp.Diff(tt.want, ruleIDs(vs)); diff != "" {
		t.Errorf("CheckRequest rules mismatch (-want +got):\n%s\nviolations: %+v", diff, vs)
	}
	for _, v := range vs {
		if v.Status != 400 && v.Status != 422 || v.Description == "" {
			t.Errorf("violation %+v: want status 400 or 422 and a description", v)
		}
	}
	bodied := tt.call.Endpoint == Provision || tt.call.Endpoint == Update || tt.call.Endpoint == Bind
	if bodied && req == nil && json.Valid([]byte(tt.body)) && tt.body != "null" && tt.body[0] == '{' {
		t.Errorf("CheckRequest returned no Request for a JSON object body")
	}
	if len(tt.want) > 0 {
		checkGolden(t, "requests", tt.name, vs)
	}
}

func TestCheckRequestShape(t *testing.T) {
	for _, tt := range requestShapeCases {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt) })
	}
}

func TestCheckRequestProvision(t *testing.T) {
	for _, tt := range requestProvisionCases {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt) })
	}
}

func TestCheckRequestUpdateBind(t *testing.T) {
	for _, tt := range requestUpdateBindCases {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt) })
	}
}

func TestRequestGoldenFiles(t *testing.T) {
	var names []string
	for _, tt := range allRequestCases() {
		if len(tt.want) > 0 {
			names = append(names, tt.name)
		}
	}
	checkNoStrayGoldens(t, "requests", names)
}

func TestCheckRequestDecodes(t *testing.T) {
	req, vs := CheckRequest(provisionCall, osb.MustParseVersion("2.15"), []byte(cfProvision), nil)
	if len(vs) > 0 {
		t.Fatalf("CheckRequest(cf provision) = %v", vs)
	}
	want := &Request{
		ServiceID:        "s-mysql",
		PlanID:           "p-small",
		OrganizationGUID: "org-1",
		SpaceGUID:        "space-1",
		Context:          json.RawMessage(`{"platform": "cloudfoundry", "organization_guid": "org-1", "space_guid": "space-1", "instance_name": "db"}`),
		Parameters:       json.RawMessage(`{"size": 10}`),
		MaintenanceInfo:  &osb.MaintenanceInfo{Version: "1.1.0"},
	}
	if diff := cmp.Diff(want, req, cmpIgnoreFields); diff != "" {
		t.Errorf("Request mismatch (-want +got):\n%s", diff)
	}
	if len(req.Fields) != 7 {
		t.Errorf("Request.Fields has %d members, want 7: %v", len(req.Fields), req.Fields)
	}

	upd := `{"service_id": "s", "plan_id": "p2", "previous_values": {"service_id": "s", "plan_id": "p1",
		"maintenance_info": {"version": "1.0.0", "description": "ignored"}}}`
	req, _ = CheckRequest(updateCall, osb.MustParseVersion("2.15"), []byte(upd), nil)
	wantPV := &PreviousValues{ServiceID: "s", PlanID: "p1", MaintenanceInfo: &osb.MaintenanceInfo{Version: "1.0.0"}}
	if diff := cmp.Diff(wantPV, req.PreviousValues); diff != "" {
		t.Errorf("PreviousValues mismatch (-want +got):\n%s", diff)
	}
	rotation := `{"service_id": "s", "plan_id": "p", "predecessor_binding_id": "b-0"}`
	if req, _ = CheckRequest(bindCall, osb.MustParseVersion("2.17"), []byte(rotation), nil); req.PredecessorBindingID != "b-0" {
		t.Errorf("at 2.17 PredecessorBindingID = %q, want b-0", req.PredecessorBindingID)
	}
	if req, _ = CheckRequest(bindCall, osb.MustParseVersion("2.16"), []byte(rotation), nil); req.PredecessorBindingID != "" {
		t.Errorf("at 2.16 PredecessorBindingID = %q, want none: the version does not define it", req.PredecessorBindingID)
	}
	req, _ = CheckRequest(updateCall, osb.MustParseVersion("2.14"), []byte(upd), nil)
	if req.PreviousValues.MaintenanceInfo != nil {
		t.Errorf("at 2.14 previous_values.maintenance_info = %+v, want nil: the version does not define it",
			req.PreviousValues.MaintenanceInfo)
	}
}
