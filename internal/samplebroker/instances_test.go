package samplebroker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// row is one table test: requests that must succeed first, then the request
// under test and what it must get.
type row struct {
	name  string
	setup []req
	req   req
	want  check
}

func runRows(t *testing.T, opts Options, rows []row) {
	t.Helper()
	for _, tt := range rows {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, opts)
			for _, s := range tt.setup {
				if s.method == tick.method {
					f.clock.Advance(DefaultAsyncDelay)
					continue
				}
				if r := f.do(s); r.status >= 300 {
					t.Fatalf("setup %s %s: status %d: %s", s.method, s.path, r.status, r.body)
				}
			}
			f.expect(t, tt.req, tt.want)
		})
	}
}

const id = "inst-1"

// tick, as a setup step, advances the clock by DefaultAsyncDelay so that
// asynchronous operations finish.
var tick = req{method: "tick"}

// put returns a provision request of the given body.
func put(body string) req { return req{method: "PUT", path: instancePath(id), body: body} }

func TestProvision(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	runRows(t, Options{}, []row{
		{name: "sync created", req: sync, want: check{status: 201}},
		{name: "identical repeat", setup: []req{sync}, req: sync, want: check{status: 200}},
		{name: "same parameters in another order",
			setup: []req{put(provisionBody(ServiceID, PlanSyncID, `{"size":"small","x":[1,2]}`))},
			req:   put(provisionBody(ServiceID, PlanSyncID, `{ "x": [1, 2], "size": "small" }`)), want: check{status: 200}},
		{name: "other parameters conflict",
			setup: []req{sync}, req: put(provisionBody(ServiceID, PlanSyncID, `{"size":"large"}`)), want: check{status: 409}},
		{name: "other plan conflicts", setup: []req{sync}, req: async, want: check{status: 409}},
		{name: "async accepted", req: async, want: check{status: 202}},
		{name: "async without accepts_incomplete",
			req: req{method: "PUT", path: instancePath(id), body: async.body}, want: check{422, "AsyncRequired"}},
		{name: "async repeat while in progress", setup: []req{async}, req: async, want: check{status: 202}},
		{name: "async conflict while in progress", setup: []req{async},
			req: req{method: "PUT", path: async.path, body: provisionBody(ServiceID, PlanAsyncID, `{"a":1}`)}, want: check{status: 409}},
		{name: "non-bindable service", req: put(provisionBody(NoBindServiceID, NoBindPlanID, "")), want: check{status: 201}},
		{name: "valid size", req: put(provisionBody(ServiceID, PlanSyncID, `{"size":"medium"}`)), want: check{status: 201}},
		{name: "maintenance_info matches",
			req:  put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","maintenance_info":{"version":"1.0.0"}}`),
			want: check{status: 201}},
		{name: "maintenance_info differs",
			req:  put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","maintenance_info":{"version":"0.9.0"}}`),
			want: check{422, "MaintenanceInfoConflict"}},
		{name: "maintenance_info for a plan without",
			req:  put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanAsyncID + `","maintenance_info":{"version":"1.0.0"}}`),
			want: check{422, "MaintenanceInfoConflict"}},
		{name: "while deprovisioning", setup: []req{async, tick, {method: "DELETE",
			path: instancePath(id) + query(ServiceID, PlanAsyncID) + "&accepts_incomplete=true"}},
			req: async, want: check{422, "ConcurrencyError"}},

		{name: "malformed JSON", req: put(`{"service_id":`), want: check{status: 400}},
		{name: "array body", req: put(`[]`), want: check{status: 400}},
		{name: "empty body", req: put(``), want: check{status: 400}},
		{name: "service_id not a string", req: put(`{"service_id":1,"plan_id":"p"}`), want: check{status: 400}},
		{name: "missing service_id", req: put(`{"plan_id":"` + PlanSyncID + `"}`), want: check{status: 400}},
		{name: "missing plan_id", req: put(`{"service_id":"` + ServiceID + `"}`), want: check{status: 400}},
		{name: "unknown service", req: put(provisionBody("nope", PlanSyncID, "")), want: check{status: 400}},
		{name: "unknown plan", req: put(provisionBody(ServiceID, "nope", "")), want: check{status: 400}},
		{name: "plan of another service", req: put(provisionBody(ServiceID, NoBindPlanID, "")), want: check{status: 400}},
		{name: "parameters not an object", req: put(provisionBody(ServiceID, PlanSyncID, `[1]`)), want: check{status: 400}},
		{name: "size outside the schema", req: put(provisionBody(ServiceID, PlanSyncID, `{"size":"huge"}`)), want: check{status: 400}},
		{name: "context not an object",
			req: put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","context":"x"}`), want: check{status: 400}},
	})
}

func TestProvisionBodies(t *testing.T) {
	f := newFixture(t, Options{})
	dashboard := map[string]any{"dashboard_url": "https://sample-broker.invalid/dashboard/" + id}
	for _, status := range []int{201, 200} {
		r := f.must(put(provisionBody(ServiceID, PlanSyncID, `{"size":"large"}`)), status)
		if diff := cmp.Diff(dashboard, r.fields(t)); diff != "" {
			t.Errorf("%d body (-want +got)\n%s", status, diff)
		}
	}
	r := f.must(req{method: "GET", path: instancePath(id)}, 200)
	want := map[string]any{
		"service_id": ServiceID, "plan_id": PlanSyncID, "dashboard_url": dashboard["dashboard_url"],
		"parameters": map[string]any{"size": "large"}, "maintenance_info": map[string]any{"version": "1.0.0"},
	}
	if diff := cmp.Diff(want, r.fields(t)); diff != "" {
		t.Errorf("GET instance (-want +got)\n%s", diff)
	}
	r = f.must(provisionAsync("other"), 202)
	if op := r.str(t, "operation"); op == "" {
		t.Errorf("202 body %s has no operation", r.body)
	}
	r = f.must(req{method: "PUT", path: instancePath("x"), body: "{"}, 400)
	if r.str(t, "description") == "" {
		t.Errorf("400 body %s has no description", r.body)
	}
}

func TestUpdate(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	patch := func(body string, acceptsIncomplete bool) req {
		p := instancePath(id)
		if acceptsIncomplete {
			p += "?accepts_incomplete=true"
		}
		return req{method: "PATCH", path: p, body: body}
	}
	toAsync := `{"service_id":"` + ServiceID + `","plan_id":"` + PlanAsyncID + `"}`
	runRows(t, Options{}, []row{
		{name: "parameters", setup: []req{sync},
			req: patch(`{"service_id":"`+ServiceID+`","parameters":{"size":"large"}}`, false), want: check{status: 200}},
		{name: "no change", setup: []req{sync}, req: patch(`{"service_id":"`+ServiceID+`"}`, false), want: check{status: 200}},
		{name: "to the async plan", setup: []req{sync}, req: patch(toAsync, true), want: check{status: 202}},
		{name: "to the async plan without accepts_incomplete", setup: []req{sync},
			req: patch(toAsync, false), want: check{422, "AsyncRequired"}},
		{name: "async plan", setup: []req{async, tick},
			req: patch(`{"service_id":"`+ServiceID+`","parameters":{"a":1}}`, true), want: check{status: 202}},
		{name: "while provisioning", setup: []req{async},
			req: patch(`{"service_id":"`+ServiceID+`"}`, true), want: check{422, "ConcurrencyError"}},
		{name: "while provisioning, 2.13", setup: []req{async},
			req:  req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true", body: `{"service_id":"` + ServiceID + `"}`, version: "2.13"},
			want: check{status: 422}},
		{name: "maintenance_info differs", setup: []req{sync},
			req: patch(`{"service_id":"`+ServiceID+`","maintenance_info":{"version":"2.0.0"}}`, false), want: check{422, "MaintenanceInfoConflict"}},
		{name: "unknown instance", req: patch(`{"service_id":"`+ServiceID+`"}`, false), want: check{status: 404}},
		{name: "missing service_id", setup: []req{sync}, req: patch(`{"plan_id":"`+PlanSyncID+`"}`, false), want: check{status: 400}},
		{name: "unknown service", setup: []req{sync}, req: patch(`{"service_id":"nope"}`, false), want: check{status: 400}},
		{name: "other service", setup: []req{sync}, req: patch(`{"service_id":"`+NoBindServiceID+`"}`, false), want: check{status: 400}},
		{name: "plan of another service", setup: []req{sync},
			req: patch(`{"service_id":"`+ServiceID+`","plan_id":"`+NoBindPlanID+`"}`, false), want: check{status: 400}},
		{name: "size outside the schema", setup: []req{sync},
			req: patch(`{"service_id":"`+ServiceID+`","parameters":{"size":1}}`, false), want: check{status: 400}},
		{name: "malformed JSON", setup: []req{sync}, req: patch(`{`, false), want: check{status: 400}},
	})
}

func TestUpdateAppliesParameters(t *testing.T) {
	f := newFixture(t, Options{})
	f.must(put(provisionBody(ServiceID, PlanSyncID, `{"size":"small","keep":true}`)), 201)
	f.must(req{method: "PATCH", path: instancePath(id), body: `{"service_id":"` + ServiceID + `","parameters":{"size":"large"}}`}, 200)
	r := f.must(req{method: "GET", path: instancePath(id)}, 200)
	want := map[string]any{"size": "large", "keep": true}
	if diff := cmp.Diff(want, r.fields(t)["parameters"]); diff != "" {
		t.Errorf("parameters after update (-want +got)\n%s", diff)
	}
}

func TestDeprovision(t *testing.T) {
	del := func(serviceID, planID string, acceptsIncomplete bool) req {
		p := instancePath(id) + query(serviceID, planID)
		if acceptsIncomplete {
			p += "&accepts_incomplete=true"
		}
		return req{method: "DELETE", path: p}
	}
	async := provisionAsync(id)
	runRows(t, Options{}, []row{
		{name: "sync", setup: []req{provisionSync(id)}, req: del(ServiceID, PlanSyncID, false), want: check{status: 200}},
		{name: "gone", req: del(ServiceID, PlanSyncID, false), want: check{status: 410}},
		{name: "twice", setup: []req{provisionSync(id), del(ServiceID, PlanSyncID, false)},
			req: del(ServiceID, PlanSyncID, false), want: check{status: 410}},
		{name: "missing service_id", setup: []req{provisionSync(id)},
			req: req{method: "DELETE", path: instancePath(id) + "?plan_id=" + PlanSyncID}, want: check{status: 400}},
		{name: "missing plan_id", setup: []req{provisionSync(id)},
			req: req{method: "DELETE", path: instancePath(id) + "?service_id=" + ServiceID}, want: check{status: 400}},
		{name: "unknown plan", setup: []req{provisionSync(id)}, req: del(ServiceID, "nope", false), want: check{status: 400}},
		{name: "async while provisioning", setup: []req{async},
			req: del(ServiceID, PlanAsyncID, true), want: check{422, "ConcurrencyError"}},
	})
	// The async plan's deletion, once the provision has finished.
	f := newFixture(t, Options{})
	f.must(async, 202)
	f.clock.Advance(DefaultAsyncDelay)
	f.expect(t, del(ServiceID, PlanAsyncID, false), check{422, "AsyncRequired"})
	first := f.expect(t, del(ServiceID, PlanAsyncID, true), check{status: 202})
	again := f.expect(t, del(ServiceID, PlanAsyncID, true), check{status: 202})
	if a, b := first.str(t, "operation"), again.str(t, "operation"); a == "" || a != b {
		t.Errorf("operations %q and %q, want the same, non-empty", a, b)
	}
}

func TestGetInstance(t *testing.T) {
	async := provisionAsync(id)
	get := req{method: "GET", path: instancePath(id)}
	runRows(t, Options{}, []row{
		{name: "sync", setup: []req{provisionSync(id)}, req: get, want: check{status: 200}},
		{name: "unknown", req: get, want: check{status: 404}},
		{name: "while provisioning", setup: []req{async}, req: get, want: check{status: 404}},
		{name: "after deletion", setup: []req{provisionSync(id),
			{method: "DELETE", path: instancePath(id) + query(ServiceID, PlanSyncID)}}, req: get, want: check{status: 404}},
	})
	f := newFixture(t, Options{})
	f.must(async, 202)
	f.clock.Advance(DefaultAsyncDelay)
	f.must(get, 200)
	f.must(req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true", body: `{"service_id":"` + ServiceID + `"}`}, 202)
	f.expect(t, get, check{422, "ConcurrencyError"})
	f.clock.Advance(DefaultAsyncDelay)
	f.must(get, 200)
}
