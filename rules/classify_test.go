package rules

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

const (
	instPath = "/v2/service_instances/inst-1"
	bindPath = instPath + "/service_bindings/bind-1"
)

// classify runs Classify and returns its result with the error as *osb.Error,
// failing the test for any other error type.
func classify(t *testing.T, method, path, query string) (Call, *osb.Error) {
	t.Helper()
	c, err := Classify(method, path, query)
	if err == nil {
		return c, nil
	}
	var oe *osb.Error
	if !errors.As(err, &oe) {
		t.Fatalf("Classify(%q, %q, %q) error %v is %T, not *osb.Error", method, path, query, err, err)
	}
	return c, oe
}

func TestClassifyEndpoints(t *testing.T) {
	tests := []struct {
		name, method, path string
		want               Call
	}{
		{"catalog", "GET", "/v2/catalog", Call{Endpoint: Catalog}},
		{"provision", "PUT", instPath, Call{Endpoint: Provision, InstanceID: "inst-1"}},
		{"update", "PATCH", instPath, Call{Endpoint: Update, InstanceID: "inst-1"}},
		{"deprovision", "DELETE", instPath, Call{Endpoint: Deprovision, InstanceID: "inst-1"}},
		{"get instance", "GET", instPath, Call{Endpoint: GetInstance, InstanceID: "inst-1"}},
		{"instance last_operation", "GET", instPath + "/last_operation",
			Call{Endpoint: InstanceLastOperation, InstanceID: "inst-1"}},
		{"bind", "PUT", bindPath, Call{Endpoint: Bind, InstanceID: "inst-1", BindingID: "bind-1"}},
		{"unbind", "DELETE", bindPath, Call{Endpoint: Unbind, InstanceID: "inst-1", BindingID: "bind-1"}},
		{"get binding", "GET", bindPath, Call{Endpoint: GetBinding, InstanceID: "inst-1", BindingID: "bind-1"}},
		{"binding last_operation", "GET", bindPath + "/last_operation",
			Call{Endpoint: BindingLastOperation, InstanceID: "inst-1", BindingID: "bind-1"}},
		{"instance named like a literal segment", "GET", "/v2/service_instances/last_operation",
			Call{Endpoint: GetInstance, InstanceID: "last_operation"}},
		{"binding named like a literal segment", "PUT", instPath + "/service_bindings/service_bindings",
			Call{Endpoint: Bind, InstanceID: "inst-1", BindingID: "service_bindings"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classify(t, tt.method, tt.path, "")
			if err != nil {
				t.Fatalf("Classify(%q, %q) = %v", tt.method, tt.path, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Classify(%q, %q) mismatch (-want +got):\n%s", tt.method, tt.path, diff)
			}
		})
	}
}

func TestClassifyQuery(t *testing.T) {
	tests := []struct {
		name, method, path, query string
		want                      Call
		wantErr                   string // description; empty for success
	}{
		{name: "accepts_incomplete true", method: "PUT", path: instPath, query: "accepts_incomplete=true",
			want: Call{Endpoint: Provision, InstanceID: "inst-1", AcceptsIncomplete: true}},
		{name: "accepts_incomplete false", method: "PUT", path: instPath, query: "accepts_incomplete=false",
			want: Call{Endpoint: Provision, InstanceID: "inst-1"}},
		{name: "accepts_incomplete absent", method: "PUT", path: instPath, query: "other=true",
			want: Call{Endpoint: Provision, InstanceID: "inst-1"}},
		{name: "accepts_incomplete escaped name", method: "PATCH", path: instPath, query: "accepts%5Fincomplete=true",
			want: Call{Endpoint: Update, InstanceID: "inst-1", AcceptsIncomplete: true}},
		{name: "deprovision ids", method: "DELETE", path: instPath,
			query: "accepts_incomplete=true&service_id=svc-1&plan_id=plan-1",
			want:  Call{Endpoint: Deprovision, InstanceID: "inst-1", AcceptsIncomplete: true, ServiceID: "svc-1", PlanID: "plan-1"}},
		{name: "last_operation operation decoded", method: "GET", path: instPath + "/last_operation",
			query: "service_id=svc-1&plan_id=plan-1&operation=task%2F42+step%3D1",
			want: Call{Endpoint: InstanceLastOperation, InstanceID: "inst-1", ServiceID: "svc-1", PlanID: "plan-1",
				Operation: "task/42 step=1"}},
		{name: "binding last_operation", method: "GET", path: bindPath + "/last_operation", query: "operation=op",
			want: Call{Endpoint: BindingLastOperation, InstanceID: "inst-1", BindingID: "bind-1", Operation: "op"}},
		{name: "empty pairs and unknown parameters ignored", method: "DELETE", path: bindPath,
			query: "&&x=%41&plan_id=p&y&",
			want:  Call{Endpoint: Unbind, InstanceID: "inst-1", BindingID: "bind-1", PlanID: "p"}},
		{name: "empty operation", method: "GET", path: instPath + "/last_operation", query: "operation=",
			want: Call{Endpoint: InstanceLastOperation, InstanceID: "inst-1"}},

		{name: "accepts_incomplete True", method: "PUT", path: instPath, query: "accepts_incomplete=True",
			wantErr: `query parameter accepts_incomplete must be "true" or "false"; the request has "True"`},
		{name: "accepts_incomplete 1", method: "PUT", path: bindPath, query: "accepts_incomplete=1",
			wantErr: `query parameter accepts_incomplete must be "true" or "false"; the request has "1"`},
		{name: "accepts_incomplete empty", method: "PUT", path: instPath, query: "accepts_incomplete",
			wantErr: `query parameter accepts_incomplete must be "true" or "false"; the request has ""`},
		{name: "accepts_incomplete twice", method: "PUT", path: instPath,
			query:   "accepts_incomplete=true&accepts_incomplete=false",
			wantErr: "query parameter accepts_incomplete appears more than once"},
		{name: "plan_id twice", method: "DELETE", path: instPath, query: "plan_id=a&plan_id=a",
			wantErr: "query parameter plan_id appears more than once"},
		{name: "semicolon", method: "PUT", path: instPath, query: "x=1;accepts_incomplete=true",
			wantErr: `the query contains ";"; separate parameters with "&"`},
		{name: "bad escape in known value", method: "GET", path: instPath + "/last_operation", query: "operation=%zz",
			wantErr: "query parameter operation has a value that is not validly percent-encoded"},
		{name: "bad escape in unknown value", method: "GET", path: "/v2/catalog", query: "x=%4",
			wantErr: `query parameter "x" has a value that is not validly percent-encoded`},
		{name: "bad escape in name", method: "GET", path: "/v2/catalog", query: "accepts_incomplete%=true",
			wantErr: `query parameter name "accepts_incomplete%" is not validly percent-encoded`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := classify(t, tt.method, tt.path, tt.query)
			if tt.wantErr != "" {
				want := &osb.Error{Status: http.StatusBadRequest, Description: tt.wantErr}
				if diff := cmp.Diff(want, err); diff != "" {
					t.Errorf("Classify(%q) error mismatch (-want +got):\n%s", tt.query, diff)
				}
				return
			}
			if err != nil {
				t.Fatalf("Classify(%q) = %v", tt.query, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Classify(%q) mismatch (-want +got):\n%s", tt.query, diff)
			}
		})
	}
}

func TestClassifyNotFound(t *testing.T) {
	tests := []struct {
		name, method, path string
	}{
		{"unknown under v2", "GET", "/v2/foo"},
		{"root", "GET", "/"},
		{"empty", "GET", ""},
		{"v2 alone", "GET", "/v2"},
		{"v2 slash", "GET", "/v2/"},
		{"other version", "GET", "/v3/catalog"},
		{"no leading slash", "GET", "v2/catalog"},
		{"catalog trailing slash", "GET", "/v2/catalog/"},
		{"catalog child", "GET", "/v2/catalog/x"},
		{"catalog escaped", "GET", "/v2/c%61talog"},
		{"catalog case", "GET", "/v2/Catalog"},
		{"instances collection", "GET", "/v2/service_instances"},
		{"instance trailing slash", "PUT", instPath + "/"},
		{"last_operation trailing slash", "GET", instPath + "/last_operation/"},
		{"instance unknown child", "GET", instPath + "/foo"},
		{"bindings collection", "GET", instPath + "/service_bindings"},
		{"binding trailing slash", "PUT", bindPath + "/"},
		{"binding unknown child", "GET", bindPath + "/foo"},
		{"binding last_operation trailing slash", "GET", bindPath + "/last_operation/"},
		{"too deep", "GET", bindPath + "/last_operation/x/y"},
		{"double slash before v2 segment", "GET", "/v2//catalog"},
		{"unknown with wrong method", "POST", "/v2/foo"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := classify(t, tt.method, tt.path, "")
			want := &osb.Error{Status: http.StatusNotFound, Description: "no OSB endpoint at " + tt.method + " " + tt.path}
			if diff := cmp.Diff(want, err); diff != "" {
				t.Errorf("Classify(%q, %q) error mismatch (-want +got):\n%s", tt.method, tt.path, diff)
			}
		})
	}
}

func TestClassifyNotFoundTruncatesPath(t *testing.T) {
	path := "/v2/" + strings.Repeat("x", 1000)
	_, err := classify(t, "GET", path, "")
	want := "no OSB endpoint at GET " + path[:maxEchoedPath] + "…"
	if err == nil || err.Description != want {
		t.Errorf("Classify(long path) = %v, want description %q", err, want)
	}
}

func TestClassifyMethodNotAllowed(t *testing.T) {
	const (
		instAllow = "DELETE, GET, PATCH, PUT"
		bindAllow = "DELETE, GET, PUT"
	)
	tests := []struct {
		name, method, path, pattern, allow string
	}{
		{"POST catalog", "POST", "/v2/catalog", "/v2/catalog", "GET"},
		{"HEAD catalog", "HEAD", "/v2/catalog", "/v2/catalog", "GET"},
		{"OPTIONS catalog", "OPTIONS", "/v2/catalog", "/v2/catalog", "GET"},
		{"lower-case get", "get", "/v2/catalog", "/v2/catalog", "GET"},
		{"POST instance", "POST", instPath, "/v2/service_instances/:instance_id", instAllow},
		{"HEAD instance", "HEAD", instPath, "/v2/service_instances/:instance_id", instAllow},
		{"PUT instance last_operation", "PUT", instPath + "/last_operation",
			"/v2/service_instances/:instance_id/last_operation", "GET"},
		{"PATCH binding", "PATCH", bindPath,
			"/v2/service_instances/:instance_id/service_bindings/:binding_id", bindAllow},
		{"DELETE binding last_operation", "DELETE", bindPath + "/last_operation",
			"/v2/service_instances/:instance_id/service_bindings/:binding_id/last_operation", "GET"},
		{"wrong method wins over bad id", "POST", "/v2/service_instances/%2F",
			"/v2/service_instances/:instance_id", instAllow},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := classify(t, tt.method, tt.path, "")
			want := &osb.Error{
				Status: http.StatusMethodNotAllowed,
				Description: "method " + tt.method + " is not allowed at " + tt.pattern +
					"; the allowed methods are " + tt.allow,
				Header: http.Header{"Allow": {tt.allow}},
			}
			if diff := cmp.Diff(want, err); diff != "" {
				t.Errorf("Classify(%q, %q) error mismatch (-want +got):\n%s", tt.method, tt.path, diff)
			}
		})
	}
}
