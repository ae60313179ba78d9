package rules

import (
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// provisionBody returns a 2.15 provision body for the service and plan with
// extra members appended.
func provisionBody(service, plan, extra string) string {
	return `{"service_id": "` + service + `", "plan_id": "` + plan + `", "organization_guid": "o", "space_guid": "s"` + extra + `}`
}

// requestCatalogCases are the rules that read testdata/requests/catalog.json.
var requestCatalogCases = []requestCase{
	{name: "catalog_provision_ok", call: provisionCall, version: "2.15", catalog: true, body: cfProvision},
	{name: "catalog_provision_unknown_service", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-nosql", "p-small", ""), want: []string{"request.catalog.plan"}},
	{name: "catalog_provision_unknown_plan", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-9", ""), want: []string{"request.catalog.plan"}},
	{name: "catalog_provision_plan_of_other_service", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-cache", ""), want: []string{"request.catalog.plan"}},
	{name: "catalog_provision_skipped_without_ids", call: provisionCall, version: "2.15", catalog: true,
		body: `{"organization_guid": "o", "space_guid": "s"}`,
		want: []string{"request.service_id.required", "request.plan_id.required"}},
	{name: "catalog_maintenance_info_matches", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-small", `, "maintenance_info": {"version": "1.1.0"}`)},
	{name: "catalog_maintenance_info_conflict", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-small", `, "maintenance_info": {"version": "1.0.0"}`),
		want: []string{"request.maintenance_info.conflict"}},
	{name: "catalog_maintenance_info_plan_has_none", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-large", `, "maintenance_info": {"version": "1.0.0"}`),
		want: []string{"request.maintenance_info.conflict"}},
	{name: "catalog_maintenance_info_ignored_at_2_14", call: provisionCall, version: "2.14", catalog: true,
		body: provisionBody("s-mysql", "p-small", `, "maintenance_info": {"version": "1.0.0"}`)},
	{name: "catalog_provision_parameters_schema", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-small", `, "parameters": {"size": 500}`),
		want: []string{"request.parameters.schema"}},
	{name: "catalog_provision_parameters_without_schema", call: provisionCall, version: "2.15", catalog: true,
		body: provisionBody("s-mysql", "p-large", `, "parameters": {"size": 500}`)},
	{name: "catalog_provision_several_problems", call: provisionCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "space_guid": "s",
			"maintenance_info": {"version": "0.9.0"}, "parameters": {"size": "big"}}`,
		want: []string{"request.organization_guid.required", "request.maintenance_info.conflict", "request.parameters.schema"}},
	{name: "catalog_bind_ok", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "parameters": {"role": "ro"}}`},
	{name: "catalog_bind_plan_not_bindable", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-unbindable"}`, want: []string{"request.catalog.not_bindable"}},
	{name: "catalog_bind_service_not_bindable", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-redis", "plan_id": "p-store"}`, want: []string{"request.catalog.not_bindable"}},
	{name: "catalog_bind_plan_overrides_service", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-redis", "plan_id": "p-cache"}`},
	{name: "catalog_bind_unknown_plan", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-redis", "plan_id": "p-9"}`, want: []string{"request.catalog.plan"}},
	{name: "catalog_bind_parameters_schema", call: bindCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "parameters": {"role": "admin"}}`,
		want: []string{"request.parameters.schema"}},
	{name: "catalog_update_plan_not_updateable", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-large", "previous_values": {"plan_id": "p-small"}}`,
		want: []string{"request.catalog.plan_not_updateable"}},
	{name: "catalog_update_plan_updateable", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "previous_values": {"plan_id": "p-large"}}`},
	{name: "catalog_update_service_updateable", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-redis", "plan_id": "p-cache", "previous_values": {"plan_id": "p-store"}}`},
	{name: "catalog_update_same_plan", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-small", "previous_values": {"plan_id": "p-small"}, "parameters": {"size": 20}}`},
	{name: "catalog_update_plan_change_unknown", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-large"}`},
	{name: "catalog_update_unknown_target", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-9", "previous_values": {"plan_id": "p-large"}}`,
		want: []string{"request.catalog.plan"}},
	{name: "catalog_update_unknown_service", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-nosql", "parameters": {"a": 1}}`, want: []string{"request.catalog.service"}},
	{name: "catalog_update_removed_plan", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "plan_id": "p-retired", "previous_values": {"plan_id": "p-retired"}, "parameters": {"a": 1}}`},
	{name: "catalog_update_parameters_schema", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "previous_values": {"plan_id": "p-small"}, "parameters": {"size": 5}}`,
		want: []string{"request.parameters.schema"}},
	{name: "catalog_update_maintenance_info_conflict", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "previous_values": {"plan_id": "p-small", "maintenance_info": {"version": "1.0.0"}},
			"maintenance_info": {"version": "1.2.0"}}`,
		want: []string{"request.maintenance_info.conflict"}},
	{name: "catalog_update_maintenance_info_upgrade", call: updateCall, version: "2.15", catalog: true,
		body: `{"service_id": "s-mysql", "previous_values": {"plan_id": "p-small", "maintenance_info": {"version": "1.0.0"}},
			"maintenance_info": {"version": "1.1.0"}}`},
	{name: "catalog_deprovision_not_checked", call: Call{Endpoint: Deprovision, InstanceID: "i-1", ServiceID: "s-gone", PlanID: "p-gone"},
		version: "2.15", catalog: true},
}

func TestCheckRequestCatalog(t *testing.T) {
	for _, tt := range requestCatalogCases {
		t.Run(tt.name, func(t *testing.T) { runRequestCase(t, tt) })
	}
}

func TestCheckRequestMaintenanceInfoConflictCode(t *testing.T) {
	_, vs := CheckRequest(provisionCall, osb.MustParseVersion("2.15"),
		[]byte(provisionBody("s-mysql", "p-small", `, "maintenance_info": {"version": "1.0.0"}`)), testCatalog())
	if len(vs) != 1 || vs[0].Status != 422 || vs[0].Code != osb.CodeMaintenanceInfoConflict {
		t.Errorf("CheckRequest = %+v, want one 422 %s", vs, osb.CodeMaintenanceInfoConflict)
	}
}
