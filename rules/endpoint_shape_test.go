package rules

import "testing"

func TestEndpointOf(t *testing.T) {
	for _, tc := range []struct {
		name, method, path string
		want               Endpoint
		template           string
	}{
		{"catalog", "GET", "/v2/catalog", Catalog, "/v2/catalog"},
		{"provision", "PUT", "/v2/service_instances/i-1", Provision, "/v2/service_instances/{instance_id}"},
		{"bad id still has the shape", "PUT", "/v2/service_instances/%zz", Provision, "/v2/service_instances/{instance_id}"},
		{"poll", "GET", "/v2/service_instances/i-1/last_operation", InstanceLastOperation, "/v2/service_instances/{instance_id}/last_operation"},
		{"unbind", "DELETE", "/v2/service_instances/i/service_bindings/b", Unbind, "/v2/service_instances/{instance_id}/service_bindings/{binding_id}"},
		{"binding poll", "GET", "/v2/service_instances/i/service_bindings/b/last_operation", BindingLastOperation,
			"/v2/service_instances/{instance_id}/service_bindings/{binding_id}/last_operation"},
		{"wrong method", "POST", "/v2/catalog", Unknown, ""},
		{"no endpoint", "GET", "/v2/nothing", Unknown, ""},
		{"not under /v2", "GET", "/catalog", Unknown, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := EndpointOf(tc.method, tc.path)
			if got != tc.want || got.Template() != tc.template {
				t.Errorf("EndpointOf(%s %s) = %v %q, want %v %q", tc.method, tc.path, got, got.Template(), tc.want, tc.template)
			}
		})
	}
	if n := testing.AllocsPerRun(100, func() { _ = EndpointOf("GET", "/v2/service_instances/i/service_bindings/b/last_operation").Template() }); n != 0 {
		t.Errorf("EndpointOf allocates %v times", n)
	}
}
