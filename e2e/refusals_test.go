package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// clientCall is one OSB client method, called with valid arguments.
type clientCall struct {
	name  string
	since osb.APIVersion // the client refuses the call below this version
	call  func(c osb.Client) error
}

var (
	anyService = samplebroker.ServiceID
	anyPlan    = samplebroker.PlanAsyncID
	anyOp      = osb.OperationKey("provision-1")
)

// everyCall covers each endpoint of the client, mutating and not.
var everyCall = []clientCall{
	{"catalog", osb.Version2_11(), func(c osb.Client) error { _, err := c.GetCatalog(); return err }},
	{"provision", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "i", AcceptsIncomplete: true,
			ServiceID: anyService, PlanID: anyPlan, OrganizationGUID: orgGUID, SpaceGUID: spaceGUID})
		return err
	}},
	{"update", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.UpdateInstance(&osb.UpdateInstanceRequest{InstanceID: "i", AcceptsIncomplete: true, ServiceID: anyService})
		return err
	}},
	{"last_operation", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.PollLastOperation(&osb.LastOperationRequest{InstanceID: "i", OperationKey: &anyOp})
		return err
	}},
	{"bind", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.Bind(&osb.BindRequest{BindingID: "b", InstanceID: "i", ServiceID: anyService, PlanID: anyPlan})
		return err
	}},
	{"unbind", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.Unbind(&osb.UnbindRequest{BindingID: "b", InstanceID: "i", ServiceID: anyService, PlanID: anyPlan})
		return err
	}},
	{"deprovision", osb.Version2_11(), func(c osb.Client) error {
		_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "i", AcceptsIncomplete: true, ServiceID: anyService, PlanID: anyPlan})
		return err
	}},
	{"get instance", osb.Version2_14(), func(c osb.Client) error {
		_, err := c.GetInstance(&osb.GetInstanceRequest{InstanceID: "i"})
		return err
	}},
	{"get binding", osb.Version2_14(), func(c osb.Client) error {
		_, err := c.GetBinding(&osb.GetBindingRequest{InstanceID: "i", BindingID: "b"})
		return err
	}},
	{"binding last_operation", osb.Version2_14(), func(c osb.Client) error {
		_, err := c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: "i", BindingID: "b"})
		return err
	}},
}

// TestRefusedCallsNeverReachTheBroker sends every call with bad credentials
// or too old an API version, through the real client, and checks the
// gateway's answer on the wire and that no broker saw any of them.
func TestRefusedCallsNeverReachTheBroker(t *testing.T) {
	tests := []struct {
		name       string
		prefix     string
		user, pass string // empty user: no Authorization header
		version    osb.APIVersion
		status     int
	}{
		{"wrong password", prodSample, prodUser, "not-the-password", osb.Version2_14(), http.StatusUnauthorized},
		{"unknown user", prodAPI, "nobody", prodPass, osb.Version2_14(), http.StatusUnauthorized},
		{"other tenant's credentials", prodAPI, devUser, devPass, osb.Version2_14(), http.StatusUnauthorized},
		{"broker's own credentials", prodSample, sampleUser, samplePass, osb.Version2_14(), http.StatusUnauthorized},
		{"no credentials", devSample, "", "", osb.Version2_14(), http.StatusUnauthorized},
		{"wrong password on the legacy route", prodLegacy, prodUser, "x", osb.Version2_11(), http.StatusUnauthorized},
		{"wrong password and too old a version", prodAPI, prodUser, "x", osb.Version2_13(), http.StatusUnauthorized},
		{"2.13 below the sample minimum 2.14", prodSample, prodUser, prodPass, osb.Version2_13(), http.StatusPreconditionFailed},
		{"2.13 below the brokerapi minimum 2.14", devAPI, devUser, devPass, osb.Version2_13(), http.StatusPreconditionFailed},
		{"2.11 below the sample minimum 2.14", devSample, devUser, devPass, osb.Version2_11(), http.StatusPreconditionFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c := e.client(t, tc.prefix, tc.version, tc.user, tc.pass)
			for _, cc := range everyCall {
				if !tc.version.AtLeast(cc.since) {
					continue // the client does not send it
				}
				he := wantHTTPError(t, cc.call(c), tc.status)
				x := e.gateway.last(t)
				if x.Status != tc.status {
					t.Errorf("%s: status on the wire %d, want %d", cc.name, x.Status, tc.status)
				}
				wantOSBError(t, cc.name, x, he)
				if tc.status == http.StatusUnauthorized {
					if diff := cmp.Diff([]string{`Basic realm="` + proxy.Realm + `"`}, x.header.Values("WWW-Authenticate")); diff != "" {
						t.Errorf("%s: WWW-Authenticate (-want +got):\n%s", cc.name, diff)
					}
				}
			}
			if diff := cmp.Diff(brokerCalls{}, e.calls()); diff != "" {
				t.Errorf("requests that reached a broker (-want +got):\n%s", diff)
			}
		})
	}
}

// wantOSBError checks that the gateway answered with an OSB error body, and
// that the client read its description.
func wantOSBError(t *testing.T, call string, x exchange, he *osb.HTTPStatusCodeError) {
	t.Helper()
	if ct := x.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q, want application/json", call, ct)
	}
	var body struct{ Description string }
	if err := json.Unmarshal([]byte(x.Body), &body); err != nil || body.Description == "" {
		t.Errorf("%s: body %q is not an OSB error with a description (%v)", call, x.Body, err)
	}
	if he != nil && (he.Description == nil || *he.Description != body.Description) {
		t.Errorf("%s: the client read description %v, want %q", call, he.Description, body.Description)
	}
}

// TestVersionGatesNeverReachTheBroker sends, on the legacy route (which
// accepts any 2.x), requests the client itself would not send: endpoints and
// asynchronous forms newer than the version in the request, and no version
// at all. The gateway answers 412 and the broker sees nothing.
func TestVersionGatesNeverReachTheBroker(t *testing.T) {
	const inst = "/v2/service_instances/i"
	const ids = "service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanAsyncID
	tests := []struct {
		name, method, path, version, body string
	}{
		{"get instance at 2.13", http.MethodGet, inst, "2.13", ""},
		{"get binding at 2.11", http.MethodGet, inst + "/service_bindings/b", "2.11", ""},
		{"binding last_operation at 2.13", http.MethodGet, inst + "/service_bindings/b/last_operation", "2.13", ""},
		{"async bind at 2.13", http.MethodPut, inst + "/service_bindings/b?accepts_incomplete=true", "2.13",
			`{"service_id":"` + samplebroker.ServiceID + `","plan_id":"` + samplebroker.PlanAsyncID + `"}`},
		{"async unbind at 2.8", http.MethodDelete, inst + "/service_bindings/b?accepts_incomplete=true&" + ids, "2.8", ""},
		{"catalog without a version", http.MethodGet, "/v2/catalog", "", ""},
	}
	e := newEnv(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var body io.Reader
			if tc.body != "" {
				body = strings.NewReader(tc.body)
			}
			req, err := http.NewRequest(tc.method, e.url+prodLegacy+tc.path, body)
			if err != nil {
				t.Fatal(err)
			}
			req.SetBasicAuth(prodUser, prodPass)
			if tc.version != "" {
				req.Header.Set("X-Broker-API-Version", tc.version)
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			x := e.gateway.last(t)
			if x.Status != http.StatusPreconditionFailed {
				t.Errorf("status %d, want 412; body %s", x.Status, x.Body)
			}
			wantOSBError(t, tc.name, x, nil)
		})
	}
	if diff := cmp.Diff(brokerCalls{}, e.calls()); diff != "" {
		t.Errorf("requests that reached a broker (-want +got):\n%s", diff)
	}
}
