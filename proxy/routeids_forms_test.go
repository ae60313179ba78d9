package proxy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// idForm is one way a platform may write a derived id.
type idForm struct {
	name string
	// query and body write the derived id d as a query value (raw) and
	// as a JSON string's contents.
	query, body func(d string) string
	// got is what the gateway read (the query value decoded); "" when the
	// form is the one the route shows, or the broker's own id: the call
	// goes on, with the broker's id.
	got func(d string) string
}

// pctEncode percent-encodes every byte of s, in upper-case hex.
func pctEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		fmt.Fprintf(&b, "%%%02X", s[i])
	}
	return b.String()
}

var idForms = func() []idForm {
	same := func(d string) string { return d }
	upper := strings.ToUpper
	braces := func(d string) string { return "{" + d + "}" }
	urn := func(d string) string { return "urn:uuid:" + d }
	hex := func(d string) string { return strings.ReplaceAll(d, "-", "") }
	return []idForm{
		{"canonical", same, same, nil},
		{"canonical percent-encoded", pctEncode, func(d string) string { return `\u00` + fmt.Sprintf("%x", d[0]) + d[1:] }, nil},
		{"upper case", upper, upper, upper},
		{"mixed case", func(d string) string { return upper(d[:8]) + d[8:] }, func(d string) string { return upper(d[:8]) + d[8:] },
			func(d string) string { return upper(d[:8]) + d[8:] }},
		{"braces", braces, braces, braces},
		{"percent-encoded braces", func(d string) string { return "%7B" + d + "%7D" }, func(d string) string { return `\u007B` + d + `\u007d` }, braces},
		{"percent-encoded upper case in braces", func(d string) string { return pctEncode(braces(upper(d))) }, func(d string) string { return braces(upper(d)) },
			func(d string) string { return braces(upper(d)) }},
		{"urn:uuid", urn, urn, urn},
		{"URN:UUID upper case", func(d string) string { return upper(urn(d)) }, func(d string) string { return upper(urn(d)) },
			func(d string) string { return upper(urn(d)) }},
		{"32 hex digits", hex, hex, hex},
	}
}()

// idFormGoldens are the rows of TestRouteIDsForms whose answer is a
// golden file: one refusal for an id in the query, one in the body.
var idFormGoldens = map[string]string{
	"deprovision/service_id/percent-encoded upper case in braces": "routeids_query_form",
	"update/plan_id/urn:uuid":                                     "routeids_body_form",
}

// TestRouteIDsForms is the regression test of derived ids in another
// case or in braces sent in a query string, which reached the broker
// unmapped: on every endpoint that carries a service_id and plan_id, in
// the query (deprovision, unbind, both last_operations, GET instance and
// binding) or in the body (provision, update, bind), a derived id as the
// route shows it, percent-encoded or not, reaches the broker as the
// broker's id; one in another form (case, braces, urn:uuid:, 32 hex
// digits, percent-encoded or JSON-escaped) gets one 400, the same for
// query and body, saying what came and what was expected, and the broker
// is not called; the broker's own id passes unchanged.
func TestRouteIDsForms(t *testing.T) {
	e := newIDsEnv(t, samplebroker.Options{}, "")
	const ctx = `"context":{"platform":"cloudfoundry","organization_guid":"org","space_guid":"space"}`
	type endpoint struct {
		name, method, path string // path: %[1]s instance, %[2]s binding
		query, body        bool
		pre                string // the query before the ids
		setup              int    // 0 none, 1 an instance, 2 an instance and a binding
	}
	endpoints := []endpoint{
		{"provision", "PUT", "/v2/service_instances/%[1]s", false, true, "", 0},
		{"update", "PATCH", "/v2/service_instances/%[1]s", false, true, "", 1},
		{"bind", "PUT", "/v2/service_instances/%[1]s/service_bindings/%[2]s", false, true, "", 1},
		{"deprovision", "DELETE", "/v2/service_instances/%[1]s", true, false, "accepts_incomplete=true&", 1},
		{"instance last_operation", "GET", "/v2/service_instances/%[1]s/last_operation", true, false, "operation=op&", 1},
		{"GET instance", "GET", "/v2/service_instances/%[1]s", true, false, "", 1},
		{"unbind", "DELETE", "/v2/service_instances/%[1]s/service_bindings/%[2]s", true, false, "", 2},
		{"binding last_operation", "GET", "/v2/service_instances/%[1]s/service_bindings/%[2]s/last_operation", true, false, "", 2},
		{"GET binding", "GET", "/v2/service_instances/%[1]s/service_bindings/%[2]s", true, false, "", 2},
	}
	canonical := func(svc, plan string) string {
		return `{"service_id":"` + svc + `","plan_id":"` + plan + `","organization_guid":"org","space_guid":"space",` + ctx + `}`
	}
	n := 0
	for _, ep := range endpoints {
		for _, which := range []string{"service_id", "plan_id", "broker's own"} {
			for _, f := range idForms {
				// The broker's own ids pass unchanged; in another form they
				// are ids the gateway does not know (refused by validation or
				// by the broker, as on a route without ids).
				if which == "broker's own" && f.got != nil {
					continue
				}
				name := ep.name + "/" + which + "/" + f.name
				n++
				instance, binding := fmt.Sprintf("i-%d", n), fmt.Sprintf("b-%d", n)
				if ep.setup >= 1 {
					if res, b := e.call(t, "/one", "PUT", "/v2/service_instances/"+instance, canonical(oneServiceID, onePlanSyncID)); res.StatusCode != http.StatusCreated {
						t.Fatalf("%s: provision: %d %s", name, res.StatusCode, b)
					}
				}
				if ep.setup >= 2 {
					if res, b := e.call(t, "/one", "PUT", "/v2/service_instances/"+instance+"/service_bindings/"+binding,
						`{"service_id":"`+oneServiceID+`","plan_id":"`+onePlanSyncID+`",`+ctx+`}`); res.StatusCode != http.StatusCreated {
						t.Fatalf("%s: bind: %d %s", name, res.StatusCode, b)
					}
				}
				// The ids as sent, and the broker's ids the call should reach it with.
				svc, plan := oneServiceID, onePlanSyncID
				wantSvc, wantPlan := samplebroker.ServiceID, samplebroker.PlanSyncID
				write := f.query
				if ep.body {
					write = f.body
				}
				var field, want, got string
				switch which {
				case "service_id":
					svc = write(oneServiceID)
					if f.got != nil {
						field, want, got = "service_id", oneServiceID, f.got(oneServiceID)
					}
				case "plan_id":
					plan = write(onePlanSyncID)
					if f.got != nil {
						field, want, got = "plan_id", onePlanSyncID, f.got(onePlanSyncID)
					}
				default:
					svc, plan = write(samplebroker.ServiceID), write(samplebroker.PlanSyncID)
					wantSvc, wantPlan = svc, plan
				}
				path := fmt.Sprintf(ep.path, instance, binding)
				var body string
				switch {
				case ep.query:
					path += "?" + ep.pre + "service_id=" + svc + "&plan_id=" + plan
				case ep.name == "update":
					body = `{"service_id":"` + svc + `","parameters":{},"previous_values":{"service_id":"` + svc + `","plan_id":"` + plan + `"},` + ctx + `}`
					if field == "plan_id" {
						field = "previous_values.plan_id"
					}
				case ep.name == "bind":
					body = `{"service_id":"` + svc + `","plan_id":"` + plan + `","bind_resource":{"app_guid":"app"},` + ctx + `}`
				default:
					body = canonical(svc, plan)
				}
				if ep.query && field != "" {
					field = "query parameter " + field
				}
				before := len(e.broker.requests())
				res, b := e.call(t, "/one", ep.method, path, body)
				after := e.broker.requests()[before:]
				if field != "" {
					var ans struct{ Description string }
					_ = json.Unmarshal([]byte(b), &ans)
					says := fmt.Sprintf(`%s must be %q, as the route of tenant "t1" to broker "b" shows it, got %q`, field, want, got)
					if res.StatusCode != http.StatusBadRequest || !strings.HasPrefix(ans.Description, says) {
						t.Errorf("%s: %d %s, want 400 saying %s", name, res.StatusCode, b, says)
					}
					if len(after) != 0 {
						t.Errorf("%s: the broker got %v, want no call", name, after)
					}
					if g, ok := idFormGoldens[name]; ok {
						checkGolden(t, g, res, b)
					}
					continue
				}
				var reached *brokerRequest
				for i := range after {
					if after[i].path == fmt.Sprintf(ep.path, instance, binding) && after[i].method == ep.method {
						reached = &after[i]
					}
				}
				if reached == nil {
					t.Errorf("%s: the broker got %v, want the %s (gateway answered %d %s)", name, after, ep.name, res.StatusCode, b)
					continue
				}
				if want := ep.pre + "service_id=" + wantSvc + "&plan_id=" + wantPlan; ep.query && reached.query != want {
					t.Errorf("%s: the broker got the query %q, want %q", name, reached.query, want)
				}
				if ep.body && (!strings.Contains(reached.body, `"service_id":"`+wantSvc+`"`) || !strings.Contains(reached.body, `"plan_id":"`+wantPlan+`"`)) {
					t.Errorf("%s: the broker got the body %s, want service_id %s and plan_id %s", name, reached.body, wantSvc, wantPlan)
				}
			}
		}
	}
	checkBrokerSawOwnIDs(t, e.broker.requests(), n)
}
