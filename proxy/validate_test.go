package proxy

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// sampleYAML fronts a modern sample broker with requests enforced and
// responses enforced, the same broker with everything in report mode, and
// a legacy (2.8) sample broker.
const sampleYAML = `
admin: {address: "off"}
brokers:
  - name: strict
    url: ${SAMPLE_URL}
    username: sample
    password: sample-secret
    validation: {requests: enforce, responses: enforce}
  - name: lenient
    url: ${SAMPLE_URL}
    username: sample
    password: sample-secret
    validation: {requests: report, responses: report}
  - name: legacy
    url: ${LEGACY_URL}
    username: sample
    password: sample-secret
    api_version: {max: "2.8"}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: strict}, {broker: lenient}, {broker: legacy}]
`

func sampleGateway(t *testing.T) (gw *httptest.Server, modern, legacy *samplebroker.Broker) {
	t.Helper()
	modern = samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: -1})
	legacy = samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", Legacy: true})
	ms, ls := httptest.NewServer(modern), httptest.NewServer(legacy)
	t.Cleanup(ms.Close)
	t.Cleanup(ls.Close)
	_, gw = testGateway(t, sampleYAML, map[string]string{"SAMPLE_URL": ms.URL, "LEGACY_URL": ls.URL})
	return gw, modern, legacy
}

func provisionBody(plan, extra string) string {
	return fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org","space_guid":"space"%s}`, samplebroker.ServiceID, plan, extra)
}

// TestEnforcedRequestsNeverReachTheBroker: every invalid request gets the
// gateway's answer; the broker's own counter shows it saw none of them.
func TestEnforcedRequestsNeverReachTheBroker(t *testing.T) {
	gw, modern, _ := sampleGateway(t)
	bad := []struct {
		name, method, path, body string
		status                   int
		golden                   string
	}{
		{"malformed JSON", "PUT", "/v2/service_instances/i1", `{"service_id": "x",`, 400, "validate_malformed"},
		{"missing plan_id", "PUT", "/v2/service_instances/i1", fmt.Sprintf(`{"service_id":%q,"organization_guid":"o","space_guid":"s"}`, samplebroker.ServiceID), 400, ""},
		{"unknown plan", "PUT", "/v2/service_instances/i1", provisionBody("p-9", ""), 400, "validate_unknown_plan"},
		{"parameters against the schema", "PUT", "/v2/service_instances/i1", provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"huge"}`), 400, "validate_schema"},
		{"parameters not an object", "PUT", "/v2/service_instances/i1", provisionBody(samplebroker.PlanSyncID, `,"parameters":[1]`), 400, ""},
		{"bind on a non-bindable service", "PUT", "/v2/service_instances/i1/service_bindings/b1",
			fmt.Sprintf(`{"service_id":%q,"plan_id":%q}`, samplebroker.NoBindServiceID, samplebroker.NoBindPlanID), 400, ""},
		{"maintenance_info conflict", "PUT", "/v2/service_instances/i1", provisionBody(samplebroker.PlanSyncID, `,"maintenance_info":{"version":"9.9.9"}`), 422, "validate_maintenance"},
		{"deprovision without plan_id", "DELETE", "/v2/service_instances/i1?service_id=" + samplebroker.ServiceID, "", 400, ""},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			before := modern.Count("") - modern.Count(samplebroker.EndpointCatalog)
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			res, got := do(t, tc.method, gw.URL+"/t1/strict"+tc.path, t1User, t1Pass, "2.15", body)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, got)
			}
			if after := modern.Count("") - modern.Count(samplebroker.EndpointCatalog); after != before {
				t.Errorf("the broker received %d invalid requests", after-before)
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, got)
			}
		})
	}
	// The same kind of request, valid, goes through.
	res, got := do(t, "PUT", gw.URL+"/t1/strict/v2/service_instances/ok", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanSyncID, `,"parameters":{"size":"small"}`)))
	if res.StatusCode != 201 {
		t.Errorf("valid provision: %d %s", res.StatusCode, got)
	}
}

func TestReportModeForwards(t *testing.T) {
	gw, modern, _ := sampleGateway(t)
	before := modern.Count(samplebroker.EndpointProvision)
	res, _ := do(t, "PUT", gw.URL+"/t1/lenient/v2/service_instances/i1", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody("p-9", "")))
	if modern.Count(samplebroker.EndpointProvision) != before+1 {
		t.Errorf("report mode did not forward")
	}
	if res.StatusCode != 400 { // the broker's own answer to the unknown plan
		t.Errorf("status %d", res.StatusCode)
	}
}

// TestInvalidBrokerResponses: a broker answer that breaks the OSB rules is
// a 502 naming the rule and the broker where responses are enforced, and
// passes unchanged where they are reported.
func TestInvalidBrokerResponses(t *testing.T) {
	gw, modern, _ := sampleGateway(t)
	for _, tc := range []struct {
		name  string
		fault samplebroker.Fault
		rule  string
	}{
		{"malformed body", samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 200, Body: `{"state":`}, "response.body.syntax"},
		{"unknown state", samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 200, Body: `{"state":"done"}`}, "response.last_operation.state"},
		{"202 to a synchronous request", samplebroker.Fault{Endpoint: samplebroker.EndpointInstanceLastOperation, Status: 202, Body: `{}`}, "response.status"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			modern.ClearFaults()
			if err := modern.InjectFault(tc.fault); err != nil {
				t.Fatal(err)
			}
			defer modern.ClearFaults()
			path := "/v2/service_instances/i1/last_operation"
			res, got := do(t, "GET", gw.URL+"/t1/strict"+path, t1User, t1Pass, "2.15", nil)
			if res.StatusCode != 502 || !strings.Contains(got, `broker \"strict\"`) || !strings.Contains(got, tc.rule) {
				t.Errorf("enforced: %d %s", res.StatusCode, got)
			}
			res, got = do(t, "GET", gw.URL+"/t1/lenient"+path, t1User, t1Pass, "2.15", nil)
			if res.StatusCode != tc.fault.Status || got != tc.fault.Body {
				t.Errorf("reported: %d %q, want the broker's %d %q", res.StatusCode, got, tc.fault.Status, tc.fault.Body)
			}
		})
	}
}

// TestBridgingToLegacyBroker: a 2.15 platform that sends organization and
// space only in context provisions on a 2.8 broker, which needs them at
// the top level; the gateway adds them.
func TestBridgingToLegacyBroker(t *testing.T) {
	gw, _, legacy := sampleGateway(t)
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"context":{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1"}}`,
		samplebroker.ServiceID, samplebroker.PlanSyncID)
	res, got := do(t, "PUT", gw.URL+"/t1/legacy/v2/service_instances/bridged", t1User, t1Pass, "2.15", strings.NewReader(body))
	if res.StatusCode != 201 {
		t.Fatalf("provision through the bridge: %d %s", res.StatusCode, got)
	}
	if legacy.Count(samplebroker.EndpointProvision) != 1 {
		t.Errorf("legacy broker provisions: %d", legacy.Count(samplebroker.EndpointProvision))
	}
	// An endpoint 2.8 lacks is answered by the gateway.
	res, got = do(t, "GET", gw.URL+"/t1/legacy/v2/service_instances/bridged", t1User, t1Pass, "2.15", nil)
	if res.StatusCode != 412 || !strings.Contains(got, "2.8") {
		t.Errorf("GET instance on a 2.8 broker: %d %s", res.StatusCode, got)
	}
}
