package samplebroker

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestLegacy(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	asyncBind := bindReq(bindBody(ServiceID, PlanAsyncID, ""), true)
	syncBind := bindReq(bindBody(ServiceID, PlanSyncID, ""), false)
	noOrg := put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","space_guid":"s","context":{"organization_guid":"o"}}`)
	emptySpace := put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","organization_guid":"o","space_guid":""}`)
	runRows(t, Options{Legacy: true}, []row{
		{name: "provision", req: sync, want: check{status: 201}},
		{name: "provision without organization_guid", req: noOrg, want: check{status: 400}},
		{name: "provision with empty space_guid", req: emptySpace, want: check{status: 400}},
		{name: "async provision", req: async, want: check{status: 202}},
		{name: "GET instance", setup: []req{sync}, req: req{method: "GET", path: instancePath(id)}, want: check{status: 404}},
		{name: "GET binding", setup: []req{sync, syncBind}, req: req{method: "GET", path: bindingPath(id, bid)}, want: check{status: 404}},
		{name: "binding last_operation", setup: []req{sync, syncBind},
			req: req{method: "GET", path: bindingPath(id, bid) + "/last_operation"}, want: check{status: 404}},
		{name: "bind on the async plan is synchronous", setup: []req{async, tick}, req: asyncBind, want: check{status: 201}},
		{name: "unbind on the async plan is synchronous", setup: []req{async, tick, asyncBind},
			req: unbindReq(PlanAsyncID, true), want: check{status: 200}},
		{name: "last_operation ignores operation", setup: []req{async}, req: lastOpWith(id, "whatever"), want: check{status: 200}},
		{name: "concurrency without code", setup: []req{async},
			req:  req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true", body: `{"service_id":"` + ServiceID + `"}`},
			want: check{status: 422}},
		{name: "maintenance_info ignored",
			req:  put(`{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `","organization_guid":"o","space_guid":"s","maintenance_info":{"version":"9"}}`),
			want: check{status: 201}},
	})
	for _, rq := range []req{noOrg, emptySpace} {
		if f := newFixture(t, Options{}); f.do(rq).status != 201 {
			t.Errorf("non-legacy broker refuses %s", rq.body)
		}
	}
}

func TestLegacyBodies(t *testing.T) {
	f := newFixture(t, Options{Legacy: true})
	r := f.must(provisionAsync(id), 202)
	want := map[string]any{"dashboard_url": "https://sample-broker.invalid/dashboard/" + id}
	if diff := cmp.Diff(want, r.fields(t)); diff != "" {
		t.Errorf("202 body has fields a 2.8 broker lacks (-want +got)\n%s", diff)
	}
	r = f.must(lastOp(id), 200)
	if got := r.header.Get("Retry-After"); got != "" {
		t.Errorf("Retry-After %q from a 2.8 broker", got)
	}
	f.clock.Advance(DefaultAsyncDelay)
	if err := f.b.InjectFault(Fault{Endpoint: EndpointUpdate, FailOperation: true}); err != nil {
		t.Fatal(err)
	}
	f.must(req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true", body: `{"service_id":"` + ServiceID + `"}`}, 202)
	f.clock.Advance(DefaultAsyncDelay)
	got := f.must(lastOp(id), 200).fields(t)
	if diff := cmp.Diff(map[string]any{"state": "failed", "description": "Updating failed (injected fault)."}, got); diff != "" {
		t.Errorf("failed update (-want +got)\n%s", diff)
	}
}
