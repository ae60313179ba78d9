package rules

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// toleratedCase is a request a real platform sends that bends the letter of
// the OSB API and that the gateway accepts. Its golden file,
// testdata/tolerated/<name>.golden, records what the rules make of it:
// the call, and no refusal. A later rule that refuses it fails here first.
type toleratedCase struct {
	name    string
	method  string
	path    string
	query   string
	header  http.Header // what the platform sends besides auth and version
	body    string
	version string
}

// korifiIDs are the ids of testdata/requests/catalog.json.
const korifiIDs = `"service_id": "s-mysql", "plan_id": "p-small"`

// toleratedCases are the requests of korifi #3716: PUT and PATCH without
// Content-Type, and deprovision parameters in a DELETE body.
var toleratedCases = []toleratedCase{
	{name: "korifi_provision_without_content_type", method: http.MethodPut,
		path: "/v2/service_instances/korifi-1", query: "accepts_incomplete=true", header: http.Header{},
		body:    `{` + korifiIDs + `, "organization_guid": "org-1", "space_guid": "space-1", "context": {"platform": "kubernetes", "namespace": "ns"}}`,
		version: "2.15"},
	{name: "korifi_update_without_content_type", method: http.MethodPatch,
		path: "/v2/service_instances/korifi-1", query: "accepts_incomplete=true", header: http.Header{},
		body: `{"service_id": "s-mysql", "parameters": {"size": 2}}`, version: "2.15"},
	{name: "korifi_bind_without_content_type", method: http.MethodPut,
		path: "/v2/service_instances/korifi-1/service_bindings/kb-1", header: http.Header{},
		body: `{` + korifiIDs + `, "bind_resource": {"app_guid": "app-1"}}`, version: "2.15"},
	{name: "korifi_deprovision_with_body", method: http.MethodDelete,
		path: "/v2/service_instances/korifi-1", query: "accepts_incomplete=true&service_id=s-mysql&plan_id=p-small",
		header: http.Header{}, body: `{` + korifiIDs + `, "parameters": {"purge": true}}`, version: "2.15"},
	{name: "korifi_deprovision_with_body_and_content_type", method: http.MethodDelete,
		path: "/v2/service_instances/korifi-1", query: "service_id=s-mysql&plan_id=p-small",
		header: http.Header{"Content-Type": {"application/json"}}, body: `{"parameters": {"purge": true}}`, version: "2.15"},
	{name: "korifi_unbind_with_body", method: http.MethodDelete,
		path: "/v2/service_instances/korifi-1/service_bindings/kb-1", query: "service_id=s-mysql&plan_id=p-small",
		header: http.Header{}, body: `{` + korifiIDs + `}`, version: "2.15"},
}

// tolerated renders what the rules make of tc: the call it classifies as
// and the outcome of CheckRequest against the test catalog.
func tolerated(tc toleratedCase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s?%s\n", tc.method, tc.path, tc.query)
	fmt.Fprintf(&b, "Content-Type: %q\n", tc.header.Get("Content-Type"))
	c, err := Classify(tc.method, tc.path, tc.query)
	if err != nil {
		fmt.Fprintf(&b, "classify: refused: %v\n", err)
		return b.String()
	}
	fmt.Fprintf(&b, "call: %s instance=%q binding=%q service_id=%q plan_id=%q accepts_incomplete=%t\n",
		c.Endpoint, c.InstanceID, c.BindingID, c.ServiceID, c.PlanID, c.AcceptsIncomplete)
	req, vs := CheckRequest(c, osb.MustParseVersion(tc.version), []byte(tc.body), testCatalog())
	if len(vs) > 0 {
		b.WriteString("check: refused\n" + wire(vs) + "\n")
		return b.String()
	}
	b.WriteString("check: accepted\n")
	if req != nil {
		fmt.Fprintf(&b, "request: service_id=%q plan_id=%q parameters=%s\n", req.ServiceID, req.PlanID, req.Parameters)
	}
	return b.String()
}

// TestToleratedRequests pins the platform requests the gateway accepts
// although they bend the spec, so that no later strictness breaks the
// platforms that send them.
func TestToleratedRequests(t *testing.T) {
	var names []string
	for _, tc := range toleratedCases {
		names = append(names, tc.name)
		t.Run(tc.name, func(t *testing.T) {
			got := tolerated(tc)
			if !strings.Contains(got, "check: accepted\n") {
				t.Errorf("the rules refuse what the gateway must tolerate:\n%s", got)
			}
			file := filepath.Join("testdata", "tolerated", tc.name+".golden")
			if updating() {
				if err := os.WriteFile(file, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("outcome differs from %s (-want +got):\n%s", file, diff)
			}
		})
	}
	checkNoStrayGoldens(t, "tolerated", names)
}
