package proxy

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// TestVersionNegotiation checks the version stage on the wire: the
// refusals' bodies and the version the broker sees (rules.TestNegotiate
// has the rules' table).
func TestVersionNegotiation(t *testing.T) {
	gw, b1, b2 := twoTenants(t)
	tests := []struct {
		name    string
		path    string
		user    string
		pass    string
		header  []string // values sent; nil sends none
		status  int
		forward string // what the broker must see
		golden  string
	}{
		{"missing", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, nil, 412, "", "version_missing"},
		{"missing, tenant answers 400", "/platform-two/shared/v2/catalog", t2User, t2Pass, nil, 400, "", "version_missing_400"},
		{"not MAJOR.MINOR", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"latest"}, 412, "", "version_syntax"},
		{"major 3", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"3.0"}, 412, "", "version_major"},
		{"below the broker's minimum", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.8"}, 412, "", "version_below"},
		{"minimum", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.13"}, 200, "2.13", ""},
		{"inside the range", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.14"}, 200, "2.14", ""},
		{"above the maximum is capped", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.17"}, 200, "2.15", ""},
		{"far above is capped", "/t1/b1/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.99"}, 200, "2.15", ""},
		{"default range accepts 2.0", "/t1/b2/v2/service_instances/x/last_operation", t1User, t1Pass, []string{"2.0"}, 200, "2.0", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(b1.Requests()) + len(b2.Requests())
			req, _ := http.NewRequest("GET", gw.URL+tc.path, nil)
			req.SetBasicAuth(tc.user, tc.pass)
			for _, v := range tc.header {
				req.Header.Add("X-Broker-API-Version", v)
			}
			res, body := send(t, req)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			reached := len(b1.Requests())+len(b2.Requests()) > n
			if reached != (tc.status == 200) {
				t.Fatalf("broker reached = %v", reached)
			}
			if tc.forward != "" {
				b := b1
				if tc.path[:6] == "/t1/b2" {
					b = b2
				}
				if got := b.Last(t).Header.Values("X-Broker-API-Version"); len(got) != 1 || got[0] != tc.forward {
					t.Errorf("broker saw X-Broker-API-Version %q, want %q", got, tc.forward)
				}
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, body)
			}
		})
	}
}

// TestVersionGateAtTheBrokersMaximum: an endpoint newer than the newest
// version a broker speaks is refused, though the platform's version has it;
// the broker would get a header that does not know the endpoint. A flag
// the broker's version predates is dropped instead (TestAsyncBindToAnOldBrokerIsServedSynchronously).
func TestVersionGateAtTheBrokersMaximum(t *testing.T) {
	legacy := osbtest.NewBroker(t, nil)
	_, gw := testGateway(t, `
admin: {address: "off"}
brokers: [{name: legacy, url: "${URL}", api_version: {min: "2.0", max: "2.8"}, validation: {without_catalog: forward}}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: legacy}]}]
`, map[string]string{"URL": legacy.URL})
	const bindBody = `{"service_id":"s","plan_id":"p","bind_resource":{"app_guid":"a"}}`
	const provisionBody = `{"service_id":"s","plan_id":"p","organization_guid":"o","space_guid":"s"}`
	tests := []struct {
		name, method, path, body string
		status                   int
		golden                   string
	}{
		{"GET instance", "GET", "/t1/legacy/v2/service_instances/i1", "", 412, "version_broker_max"},
		{"async bind is served without the flag", "PUT", "/t1/legacy/v2/service_instances/i1/service_bindings/b1?accepts_incomplete=true", bindBody, 200, ""},
		{"binding last_operation", "GET", "/t1/legacy/v2/service_instances/i1/service_bindings/b1/last_operation", "", 412, ""},
		{"sync bind", "PUT", "/t1/legacy/v2/service_instances/i1/service_bindings/b1", bindBody, 200, ""},
		{"async provision exists at 2.8", "PUT", "/t1/legacy/v2/service_instances/i1?accepts_incomplete=true", provisionBody, 200, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(legacy.Requests())
			var in io.Reader
			if tc.body != "" {
				in = strings.NewReader(tc.body)
			}
			res, body := do(t, tc.method, gw.URL+tc.path, t1User, t1Pass, "2.14", in)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", res.StatusCode, tc.status, body)
			}
			if reached := len(legacy.Requests()) > n; reached != (tc.status == 200) {
				t.Errorf("broker reached = %v", reached)
			}
			if tc.golden != "" {
				checkGolden(t, tc.golden, res, body)
			}
		})
	}
}
