package samplebroker

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestHoldings follows instances and bindings through their lifecycles:
// what exists or is being created is held, what was deleted or failed is
// not.
func TestHoldings(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := New(Options{AsyncDelay: time.Minute, Now: func() time.Time { return now }})
	do := func(method, path, body string, want int) {
		t.Helper()
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		r.Header.Set("X-Broker-API-Version", "2.17")
		w := httptest.NewRecorder()
		b.ServeHTTP(w, r)
		if w.Code != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, w.Code, w.Body, want)
		}
	}
	prov := `{"service_id":"` + ServiceID + `","plan_id":"%s","organization_guid":"o","space_guid":"s"}`
	do(http.MethodPut, "/v2/service_instances/a", strings.Replace(prov, "%s", PlanSyncID, 1), 201)
	do(http.MethodPut, "/v2/service_instances/b?accepts_incomplete=true", strings.Replace(prov, "%s", PlanAsyncID, 1), 202)
	do(http.MethodPut, "/v2/service_instances/c", strings.Replace(prov, "%s", PlanSyncID, 1), 201)
	do(http.MethodPut, "/v2/service_instances/a/service_bindings/k", `{"service_id":"`+ServiceID+`","plan_id":"`+PlanSyncID+`"}`, 201)
	do(http.MethodDelete, "/v2/service_instances/c?service_id="+ServiceID+"&plan_id="+PlanSyncID, "", 200)
	want := Holdings{Instances: []string{"a", "b"}, Bindings: []string{"a/k"}}
	if diff := cmp.Diff(want, b.Holdings(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("holdings (-want +got):\n%s", diff)
	}
	do(http.MethodDelete, "/v2/service_instances/a/service_bindings/k?service_id="+ServiceID+"&plan_id="+PlanSyncID, "", 200)
	now = now.Add(time.Hour) // b's provision is done
	want = Holdings{Instances: []string{"a", "b"}}
	if diff := cmp.Diff(want, b.Holdings(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("holdings after the unbind (-want +got):\n%s", diff)
	}
}

// TestHoldingsEndpoint reads the holdings over HTTP, as the campaign's
// checker does.
func TestHoldingsEndpoint(t *testing.T) {
	f := newFixture(t, Options{})
	holdings := req{method: "GET", path: "/_sample/holdings"}
	if r := f.must(holdings, 200); string(r.body) != `{"instances":[],"bindings":[]}`+"\n" {
		t.Errorf("empty broker: %s", r.body)
	}
	f.must(provisionSync("b"), 201)
	f.must(provisionAsync("a"), 202)
	f.must(req{method: "PUT", path: bindingPath("b", "k"), body: bindBody(ServiceID, PlanSyncID, "")}, 201)
	if r := f.must(holdings, 200); string(r.body) != `{"instances":["a","b"],"bindings":["b/k"]}`+"\n" {
		t.Errorf("holdings: %s", r.body)
	}
	f.must(req{method: "GET", path: "/_sample/holdings", noAuth: true}, 401)
	if r := f.must(req{method: "PUT", path: "/_sample/holdings"}, 405); r.header.Get("Allow") != "GET" {
		t.Errorf("Allow %q", r.header.Get("Allow"))
	}
	if n := f.b.Count(""); n != 3 {
		t.Errorf("%d requests counted, want 3: control requests are not", n)
	}
}
