package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// responseCase is one row of the response tables: a call, its version, the
// broker's status and body, what the gateway knows, and the rule ids the
// answer must break, in order. Rows that break rules have a golden refusal
// in testdata/responses/<name>.golden.
type responseCase struct {
	name    string
	call    Call
	version string
	status  int
	body    string
	opts    ResponseOptions
	catalog bool
	want    []string
}

var (
	catalogCall      = Call{Endpoint: Catalog}
	provisionSync    = Call{Endpoint: Provision, InstanceID: "i-1"}
	updateSync       = Call{Endpoint: Update, InstanceID: "i-1"}
	deprovisionAsync = Call{Endpoint: Deprovision, InstanceID: "i-1", ServiceID: "s", PlanID: "p", AcceptsIncomplete: true}
	deprovisionSync  = Call{Endpoint: Deprovision, InstanceID: "i-1", ServiceID: "s", PlanID: "p"}
	getInstanceCall  = Call{Endpoint: GetInstance, InstanceID: "i-1"}
	instanceLastOp   = Call{Endpoint: InstanceLastOperation, InstanceID: "i-1"}
	bindAsync        = Call{Endpoint: Bind, InstanceID: "i-1", BindingID: "b-1", AcceptsIncomplete: true}
	unbindSync       = Call{Endpoint: Unbind, InstanceID: "i-1", BindingID: "b-1", ServiceID: "s", PlanID: "p"}
	unbindAsync      = Call{Endpoint: Unbind, InstanceID: "i-1", BindingID: "b-1", ServiceID: "s", PlanID: "p", AcceptsIncomplete: true}
	getBindingCall   = Call{Endpoint: GetBinding, InstanceID: "i-1", BindingID: "b-1"}
	bindingLastOp    = Call{Endpoint: BindingLastOperation, InstanceID: "i-1", BindingID: "b-1"}

	mysqlBind = ResponseOptions{Request: &Request{ServiceID: "s-mysql", PlanID: "p-small"}}
	routeBind = ResponseOptions{Request: &Request{ServiceID: "s-route", PlanID: "p-route"}}
)

// responseStatusCases has, for every row of statusTable, an answer that
// passes (TestResponseStatusTableCovered checks), and the status rules.
var responseStatusCases = []responseCase{
	{name: "catalog_200", call: catalogCall, version: "2.15", status: 200, body: `{"services": []}`},
	{name: "catalog_304", call: catalogCall, version: "2.16", status: 304},
	{name: "catalog_304_before_2_16", call: catalogCall, version: "2.15", status: 304,
		want: []string{"response.status.unexpected"}},
	{name: "catalog_500", call: catalogCall, version: "2.15", status: 500, body: `{"description": "database down"}`},
	{name: "catalog_204", call: catalogCall, version: "2.15", status: 204, want: []string{"response.status.unexpected"}},

	{name: "provision_200_identical", call: provisionSync, version: "2.15", status: 200, body: `{}`},
	{name: "provision_201", call: provisionSync, version: "2.15", status: 201, body: `{"dashboard_url": "https://db.example.com/i-1"}`},
	{name: "provision_202", call: provisionCall, version: "2.15", status: 202, body: `{"operation": "task-1"}`},
	{name: "provision_202_not_async", call: provisionSync, version: "2.15", status: 202, body: `{"operation": "task-1"}`,
		want: []string{"response.status.not_async"}},
	{name: "provision_400", call: provisionSync, version: "2.15", status: 400, body: `{"description": "size must be a number"}`},
	{name: "provision_409", call: provisionSync, version: "2.15", status: 409, body: `{}`},
	{name: "provision_422", call: provisionSync, version: "2.15", status: 422,
		body: `{"error": "AsyncRequired", "description": "This plan requires client support for asynchronous service operations."}`},
	{name: "provision_422_async_required_to_async", call: provisionCall, version: "2.15", status: 422,
		body: `{"error": "AsyncRequired"}`, want: []string{"response.error.async_required"}},
	{name: "provision_204", call: provisionSync, version: "2.15", status: 204, want: []string{"response.status.unexpected"}},
	{name: "provision_302", call: provisionSync, version: "2.15", status: 302, body: `<a href="/login">`,
		want: []string{"response.status.unexpected"}},
	{name: "provision_503", call: provisionSync, version: "2.15", status: 503, body: `{"description": "try later"}`},

	{name: "update_200", call: updateSync, version: "2.15", status: 200, body: `{}`},
	{name: "update_202", call: updateCall, version: "2.15", status: 202, body: `{"operation": "update-1"}`},
	{name: "update_400", call: updateSync, version: "2.15", status: 400, body: `{"description": "bad"}`},
	{name: "update_422", call: updateSync, version: "2.15", status: 422, body: `{"description": "plan change not supported"}`},
	{name: "update_201", call: updateSync, version: "2.15", status: 201, body: `{}`, want: []string{"response.status.unexpected"}},
	{name: "update_202_not_async", call: updateSync, version: "2.15", status: 202, body: `{}`,
		want: []string{"response.status.not_async"}},

	{name: "deprovision_200", call: deprovisionSync, version: "2.15", status: 200, body: `{}`},
	{name: "deprovision_202", call: deprovisionAsync, version: "2.15", status: 202, body: `{"operation": "delete-1"}`},
	{name: "deprovision_400", call: deprovisionSync, version: "2.15", status: 400, body: `{"description": "bad"}`},
	{name: "deprovision_410", call: deprovisionSync, version: "2.15", status: 410, body: `{}`},
	{name: "deprovision_422", call: deprovisionSync, version: "2.15", status: 422, body: `{"error": "AsyncRequired"}`},
	{name: "deprovision_201", call: deprovisionSync, version: "2.15", status: 201, body: `{}`, want: []string{"response.status.unexpected"}},

	{name: "get_instance_200", call: getInstanceCall, version: "2.15", status: 200,
		body: `{"service_id": "s", "plan_id": "p", "dashboard_url": "https://db.example.com/i-1", "parameters": {}}`},
	{name: "get_instance_404", call: getInstanceCall, version: "2.15", status: 404, body: `{}`},
	{name: "get_instance_422", call: getInstanceCall, version: "2.15", status: 422, body: `{"error": "ConcurrencyError"}`},
	{name: "get_instance_422_wrong_code", call: getInstanceCall, version: "2.15", status: 422, body: `{"error": "Busy"}`,
		want: []string{"response.error.code"}},
	{name: "get_instance_422_no_code", call: getInstanceCall, version: "2.15", status: 422, body: `{"description": "updating"}`,
		want: []string{"response.error.code"}},

	{name: "instance_last_operation_200", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "in progress", "description": "10%"}`},
	{name: "instance_last_operation_400", call: instanceLastOp, version: "2.15", status: 400, body: `{"description": "bad operation"}`},
	{name: "instance_last_operation_404", call: instanceLastOp, version: "2.16", status: 404, body: `{}`},
	{name: "instance_last_operation_404_before_2_16", call: instanceLastOp, version: "2.15", status: 404, body: `{}`},
	{name: "instance_last_operation_410", call: instanceLastOp, version: "2.15", status: 410, body: `{}`,
		opts: ResponseOptions{Polled: Deprovision}},
	{name: "instance_last_operation_410_unknown_operation", call: instanceLastOp, version: "2.15", status: 410, body: `{}`},
	{name: "instance_last_operation_410_polling_provision", call: instanceLastOp, version: "2.15", status: 410, body: `{}`,
		opts: ResponseOptions{Polled: Provision}, want: []string{"response.last_operation.gone"}},
	{name: "instance_last_operation_202", call: instanceLastOp, version: "2.15", status: 202, body: `{}`,
		want: []string{"response.status.unexpected"}},

	{name: "bind_200_identical", call: bindCall, version: "2.15", status: 200, body: `{"credentials": {"uri": "mysql://db"}}`},
	{name: "bind_201", call: bindCall, version: "2.15", status: 201, body: `{"credentials": {"uri": "mysql://db"}}`},
	{name: "bind_202", call: bindAsync, version: "2.14", status: 202, body: `{"operation": "bind-1"}`},
	{name: "bind_202_before_2_14", call: bindAsync, version: "2.13", status: 202, body: `{}`,
		want: []string{"response.status.unexpected"}},
	{name: "bind_202_not_async", call: bindCall, version: "2.15", status: 202, body: `{}`,
		want: []string{"response.status.not_async"}},
	{name: "bind_400", call: bindCall, version: "2.15", status: 400, body: `{"description": "bad"}`},
	{name: "bind_409", call: bindCall, version: "2.15", status: 409, body: `{}`},
	{name: "bind_422", call: bindCall, version: "2.15", status: 422, body: `{"error": "RequiresApp"}`},

	{name: "unbind_200", call: unbindSync, version: "2.15", status: 200, body: `{}`},
	{name: "unbind_202", call: unbindAsync, version: "2.15", status: 202, body: `{"operation": "unbind-1"}`},
	{name: "unbind_400", call: unbindSync, version: "2.15", status: 400, body: `{"description": "bad"}`},
	{name: "unbind_410", call: unbindSync, version: "2.15", status: 410, body: `{}`},
	{name: "unbind_422", call: unbindSync, version: "2.15", status: 422, body: `{"error": "ConcurrencyError"}`},

	{name: "get_binding_200", call: getBindingCall, version: "2.15", status: 200, body: `{"credentials": {"uri": "mysql://db"}}`},
	{name: "get_binding_404", call: getBindingCall, version: "2.15", status: 404, body: `{}`},
	{name: "get_binding_422", call: getBindingCall, version: "2.16", status: 422, body: `{"error": "ConcurrencyError"}`},

	{name: "binding_last_operation_200", call: bindingLastOp, version: "2.15", status: 200, body: `{"state": "succeeded"}`},
	{name: "binding_last_operation_400", call: bindingLastOp, version: "2.15", status: 400, body: `{}`},
	{name: "binding_last_operation_404", call: bindingLastOp, version: "2.16", status: 404, body: `{}`},
	{name: "binding_last_operation_410", call: bindingLastOp, version: "2.15", status: 410, body: `{}`,
		opts: ResponseOptions{Polled: Unbind}},
	{name: "binding_last_operation_410_polling_bind", call: bindingLastOp, version: "2.15", status: 410, body: `{}`,
		opts: ResponseOptions{Polled: Bind}, want: []string{"response.last_operation.gone"}},
}

// responseBodyCases are the body rules.
var responseBodyCases = []responseCase{
	{name: "body_catalog_array", call: catalogCall, version: "2.15", status: 200, body: `[]`,
		want: []string{"response.body.not_object"}},
	{name: "body_catalog_truncated", call: catalogCall, version: "2.15", status: 200, body: `{"services": [`,
		want: []string{"response.body.syntax"}},
	{name: "body_empty_success", call: provisionSync, version: "2.15", status: 201, body: ``,
		want: []string{"response.body.not_object"}},
	{name: "body_html_error", call: provisionSync, version: "2.15", status: 502, body: `<html>Bad Gateway</html>`,
		want: []string{"response.body.syntax"}},
	{name: "body_error_fields_wrong_type", call: bindCall, version: "2.15", status: 500,
		body: `{"error": 500, "description": ["failed"]}`, want: []string{"response.error.type", "response.error.description"}},
	{name: "body_error_fields_empty", call: bindCall, version: "2.15", status: 500, body: `{"error": "", "description": ""}`,
		want: []string{"response.error.type", "response.error.description"}},
	{name: "body_error_fields_empty_before_2_12", call: bindCall, version: "2.11", status: 500, body: `{"error": "", "description": ""}`},
	{name: "body_last_operation_states", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "failed", "description": ""}`},
	{name: "body_last_operation_state_unknown", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "done"}`,
		want: []string{"response.last_operation.state"}},
	{name: "body_last_operation_state_missing", call: bindingLastOp, version: "2.15", status: 200, body: `{"description": "working"}`,
		want: []string{"response.last_operation.state"}},
	{name: "body_last_operation_state_number", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": 1, "description": 2}`,
		want: []string{"response.last_operation.description.type", "response.last_operation.state"}},
	{name: "body_operation_number", call: provisionCall, version: "2.15", status: 202, body: `{"operation": 42}`,
		want: []string{"response.operation.type"}},
	{name: "body_operation_null", call: provisionCall, version: "2.15", status: 202, body: `{"operation": null}`},
	{name: "body_operation_too_long", call: deprovisionAsync, version: "2.15", status: 202,
		body: `{"operation": "` + strings.Repeat("é", MaxOperationLength+1) + `"}`, want: []string{"response.operation.length"}},
	{name: "body_operation_at_limit", call: deprovisionAsync, version: "2.15", status: 202,
		body: `{"operation": "` + strings.Repeat("é", MaxOperationLength) + `"}`},
	{name: "body_operation_long_before_2_15", call: deprovisionAsync, version: "2.14", status: 202,
		body: `{"operation": "` + strings.Repeat("x", MaxOperationLength+1) + `"}`},
	{name: "body_dashboard_url_relative", call: provisionCall, version: "2.15", status: 202,
		body: `{"dashboard_url": "/dashboard/i-1"}`, want: []string{"response.dashboard_url.absolute"}},
	{name: "body_dashboard_url_number", call: getInstanceCall, version: "2.15", status: 200,
		body: `{"dashboard_url": 1}`, want: []string{"response.dashboard_url.type"}},
	{name: "body_dashboard_url_null", call: provisionSync, version: "2.15", status: 201, body: `{"dashboard_url": null}`},
	{name: "body_update_dashboard_url_at_2_14", call: updateSync, version: "2.14", status: 200,
		body: `{"dashboard_url": "dashboard"}`, want: []string{"response.dashboard_url.absolute"}},
	{name: "body_update_dashboard_url_before_2_14", call: updateSync, version: "2.13", status: 200, body: `{"dashboard_url": "dashboard"}`},
	{name: "body_bind_202_credentials", call: bindAsync, version: "2.15", status: 202,
		body: `{"operation": "bind-1", "credentials": {"password": "secret"}}`, want: []string{"response.bind.async_credentials"}},
	{name: "body_bind_credentials_array", call: bindCall, version: "2.15", status: 201, body: `{"credentials": ["secret"]}`,
		want: []string{"response.credentials.type"}},
	{name: "body_bind_volume_mounts_object", call: bindCall, version: "2.15", status: 201, body: `{"volume_mounts": {}}`,
		want: []string{"response.volume_mounts.type"}},
	{name: "body_bind_syslog_drain_required", call: bindCall, version: "2.15", status: 201, catalog: true, opts: mysqlBind,
		body: `{"credentials": {}, "syslog_drain_url": "syslog://logs.example.com:514"}`},
	{name: "body_bind_route_service_url_not_required", call: bindCall, version: "2.15", status: 201, catalog: true, opts: mysqlBind,
		body: `{"route_service_url": "https://ratelimit.example.com"}`, want: []string{"response.bind.requires"}},
	{name: "body_bind_route_service", call: bindCall, version: "2.15", status: 201, catalog: true, opts: routeBind,
		body: `{"route_service_url": "https://ratelimit.example.com", "volume_mounts": []}`},
	{name: "body_bind_syslog_drain_not_required", call: bindCall, version: "2.15", status: 200, catalog: true, opts: routeBind,
		body: `{"syslog_drain_url": "syslog://logs.example.com:514"}`, want: []string{"response.bind.requires"}},
	{name: "body_bind_requires_without_catalog", call: bindCall, version: "2.15", status: 201, opts: routeBind,
		body: `{"syslog_drain_url": "syslog://logs.example.com:514"}`},
	{name: "body_get_binding_requires_from_query", call: Call{Endpoint: GetBinding, InstanceID: "i-1", BindingID: "b-1", ServiceID: "s-redis"},
		version: "2.16", status: 200, catalog: true, body: `{"volume_mounts": []}`, want: []string{"response.bind.requires"}},

	// instance_usable and update_repeatable (OSB 2.16).
	{name: "failure_update_last_operation", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Update},
		body: `{"state": "failed", "description": "disk full", "instance_usable": true, "update_repeatable": false}`},
	{name: "failure_deprovision_last_operation", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Deprovision}, body: `{"state": "failed", "instance_usable": false}`},
	{name: "failure_unknown_operation_last_operation", call: instanceLastOp, version: "2.17", status: 200,
		body: `{"state": "failed", "instance_usable": false, "update_repeatable": true}`},
	{name: "failure_fields_null", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Provision}, body: `{"state": "failed", "instance_usable": null, "update_repeatable": null}`},
	{name: "failure_fields_strings", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Update}, body: `{"state": "failed", "instance_usable": "true", "update_repeatable": 1}`,
		want: []string{"response.instance_usable.type", "response.update_repeatable.type"}},
	{name: "failure_fields_strings_before_2_16", call: instanceLastOp, version: "2.15", status: 200,
		opts: ResponseOptions{Polled: Update}, body: `{"state": "failed", "instance_usable": "true", "update_repeatable": 1}`},
	{name: "failure_fields_strings_to_a_2_16_platform", call: instanceLastOp, version: "2.15", status: 200,
		opts: ResponseOptions{Polled: Update, Platform: osb.MustParseVersion("2.16")},
		body: `{"state": "failed", "instance_usable": "true"}`, want: []string{"response.instance_usable.type"}},
	{name: "failure_fields_of_a_failed_provision", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Provision}, body: `{"state": "failed", "instance_usable": false, "update_repeatable": true}`,
		want: []string{"response.instance_usable.operation", "response.update_repeatable.operation"}},
	{name: "failure_update_repeatable_of_a_failed_deprovision", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Deprovision}, body: `{"state": "failed", "instance_usable": true, "update_repeatable": true}`,
		want: []string{"response.update_repeatable.operation"}},
	{name: "failure_fields_while_in_progress", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Provision}, body: `{"state": "in progress", "instance_usable": true}`},
	{name: "failure_fields_type_while_succeeded", call: instanceLastOp, version: "2.16", status: 200,
		opts: ResponseOptions{Polled: Update}, body: `{"state": "succeeded", "update_repeatable": "yes"}`,
		want: []string{"response.update_repeatable.type"}},
	{name: "failure_fields_binding_last_operation_left_alone", call: bindingLastOp, version: "2.17", status: 200,
		opts: ResponseOptions{Polled: Bind}, body: `{"state": "failed", "instance_usable": "no", "update_repeatable": false}`},
	{name: "failure_update_error", call: updateSync, version: "2.16", status: 422,
		body: `{"error": "UpgradeFailed", "description": "no room", "instance_usable": true, "update_repeatable": false}`},
	{name: "failure_deprovision_error", call: deprovisionSync, version: "2.16", status: 500,
		body: `{"description": "half deleted", "instance_usable": false}`},
	{name: "failure_update_error_not_boolean", call: updateSync, version: "2.16", status: 500,
		body: `{"description": "x", "update_repeatable": "false"}`, want: []string{"response.update_repeatable.type"}},
	{name: "failure_fields_of_a_bind_error", call: bindCall, version: "2.16", status: 500,
		body: `{"description": "x", "instance_usable": true}`, want: []string{"response.instance_usable.operation"}},
	{name: "failure_update_repeatable_of_a_deprovision_error", call: deprovisionSync, version: "2.17", status: 400,
		body: `{"description": "x", "update_repeatable": false}`, want: []string{"response.update_repeatable.operation"}},
	{name: "failure_fields_of_a_bind_error_before_2_16", call: bindCall, version: "2.15", status: 500,
		body: `{"description": "x", "instance_usable": true}`},

	// A binding's metadata (OSB 2.17).
	{name: "expiry_bind", call: bindCall, version: "2.17", status: 201,
		body: `{"credentials": {}, "metadata": {"expires_at": "2030-01-31T23:59:59Z", "renew_before": "2030-01-24T23:59:59.5+01:00"}}`},
	{name: "expiry_renew_before_equal", call: getBindingCall, version: "2.17", status: 200,
		body: `{"metadata": {"expires_at": "2030-01-31T23:59:59Z", "renew_before": "2030-02-01T00:59:59+01:00"}}`},
	{name: "expiry_renew_before_alone", call: bindCall, version: "2.17", status: 200,
		body: `{"metadata": {"renew_before": "2030-01-24T00:00:00Z"}}`},
	{name: "expiry_metadata_null", call: bindCall, version: "2.17", status: 201, body: `{"metadata": null}`},
	{name: "expiry_metadata_array", call: bindCall, version: "2.17", status: 201, body: `{"metadata": []}`,
		want: []string{"response.metadata.type"}},
	{name: "expiry_not_timestamps", call: getBindingCall, version: "2.17", status: 200,
		body: `{"metadata": {"expires_at": "next week", "renew_before": 1700000000}}`,
		want: []string{"response.metadata.expires_at.format", "response.metadata.renew_before.type"}},
	{name: "expiry_date_only", call: bindCall, version: "2.17", status: 201,
		body: `{"metadata": {"expires_at": "2030-01-31"}}`, want: []string{"response.metadata.expires_at.format"}},
	{name: "expiry_renew_after_expiry", call: bindCall, version: "2.17", status: 201,
		body: `{"metadata": {"expires_at": "2030-01-31T00:00:00Z", "renew_before": "2030-01-31T00:00:01Z"}}`,
		want: []string{"response.metadata.renew_before.after_expiry"}},
	{name: "expiry_before_2_17", call: bindCall, version: "2.16", status: 201,
		body: `{"metadata": {"expires_at": "soon", "renew_before": "later"}}`},
	{name: "expiry_to_a_2_17_platform", call: bindCall, version: "2.15", status: 201,
		opts: ResponseOptions{Platform: osb.MustParseVersion("2.17")},
		body: `{"metadata": {"expires_at": "soon"}}`, want: []string{"response.metadata.expires_at.format"}},
	{name: "expiry_async_bind_left_alone", call: bindAsync, version: "2.17", status: 202,
		body: `{"operation": "bind-1", "metadata": {"expires_at": "soon"}}`},
	{name: "expiry_provision_left_alone", call: provisionSync, version: "2.17", status: 201,
		body: `{"metadata": {"expires_at": "soon"}}`},

	{name: "body_unexpected_status_not_checked", call: updateSync, version: "2.15", status: 204, body: `garbage`,
		want: []string{"response.status.unexpected"}},
	{name: "retry_after_seconds", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"10"}}},
	{name: "retry_after_http_date", call: bindingLastOp, version: "2.15", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"Fri, 09 Jan 2026 10:00:00 GMT"}}},
	{name: "retry_after_before_2_15", call: instanceLastOp, version: "2.8", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"Sunday, 06-Nov-94 08:49:37 GMT"}}},
	{name: "retry_after_fraction", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"1.5"}}, want: []string{"response.last_operation.retry_after"}},
	{name: "retry_after_unit", call: bindingLastOp, version: "2.17", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"10s"}}, want: []string{"response.last_operation.retry_after"}},
	{name: "retry_after_twice", call: instanceLastOp, version: "2.15", status: 200, body: `{"state": "in progress"}`,
		opts: ResponseOptions{RetryAfter: []string{"10", "20"}}, want: []string{"response.last_operation.retry_after"}},
	{name: "retry_after_on_an_error", call: instanceLastOp, version: "2.15", status: 503, body: `{"description": "busy"}`,
		opts: ResponseOptions{RetryAfter: []string{"soon"}}, want: []string{"response.last_operation.retry_after"}},
	{name: "retry_after_not_on_last_operation", call: provisionSync, version: "2.15", status: 201, body: `{}`,
		opts: ResponseOptions{RetryAfter: []string{"soon"}}},
}

// runResponseCase checks one row: its rule ids and, when it breaks rules,
// its golden refusal.
func runResponseCase(t *testing.T, tt responseCase) {
	t.Helper()
	var cat CatalogView
	if tt.catalog {
		cat = testCatalog()
	}
	a, vs := CheckResponse(tt.call, osb.MustParseVersion(tt.version), tt.status, []byte(tt.body), cat, tt.opts)
	if read := ReadResponse(tt.call, tt.status, []byte(tt.body)); a != read {
		t.Errorf("CheckResponse read %+v, ReadResponse %+v", a, read)
	}
	if diff := cmp.Diff(tt.want, ruleIDs(vs)); diff != "" {
		t.Errorf("CheckResponse rules mismatch (-want +got):\n%s\nviolations: %+v", diff, vs)
	}
	for _, v := range vs {
		if v.Status != 502 || v.Description == "" {
			t.Errorf("violation %+v: want status 502 and a description", v)
		}
	}
	if len(tt.want) > 0 {
		checkGolden(t, "responses", tt.name, vs)
	}
}

func TestCheckResponseStatus(t *testing.T) {
	for _, tt := range responseStatusCases {
		t.Run(tt.name, func(t *testing.T) { runResponseCase(t, tt) })
	}
}

func TestCheckResponseBody(t *testing.T) {
	for _, tt := range responseBodyCases {
		t.Run(tt.name, func(t *testing.T) { runResponseCase(t, tt) })
	}
}

func TestResponseGoldenFiles(t *testing.T) {
	var names []string
	for _, tt := range append(append([]responseCase(nil), responseStatusCases...), responseBodyCases...) {
		if len(tt.want) > 0 {
			names = append(names, tt.name)
		}
	}
	checkNoStrayGoldens(t, "responses", names)
}

// TestResponseStatusTableCovered checks that every row of statusTable has a
// passing case in responseStatusCases at the row's first version or later.
func TestResponseStatusTableCovered(t *testing.T) {
	for e, rows := range statusTable {
		for _, r := range rows {
			found := false
			for _, tt := range responseStatusCases {
				if tt.call.Endpoint == Endpoint(e) && tt.status == r.status && tt.want == nil &&
					osb.MustParseVersion(tt.version).AtLeast(r.since) {
					found = true
					break
				}
			}
			if !found {
				t.Errorf("no passing case for %s %d (since %s)", Endpoint(e), r.status, r.since)
			}
		}
	}
}
