package samplebroker

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lastOpWith polls the instance's last_operation with an operation string.
func lastOpWith(id, op string) req {
	return req{method: "GET", path: instancePath(id) + "/last_operation" +
		query(ServiceID, PlanAsyncID) + "&operation=" + url.QueryEscape(op)}
}

// state polls and returns state, or the status when it is not 200.
func (f *fixture) state(t *testing.T, rq req) string {
	t.Helper()
	r := f.do(rq)
	if r.status != http.StatusOK {
		return http.StatusText(r.status)
	}
	return r.str(t, "state")
}

func TestAsyncInstanceLifecycle(t *testing.T) {
	f := newFixture(t, Options{})
	op := f.must(provisionAsync(id), 202).str(t, "operation")

	r := f.must(lastOpWith(id, op), 200)
	if diff := cmp.Diff(map[string]any{"state": "in progress", "description": "Provisioning is in progress."}, r.fields(t)); diff != "" {
		t.Errorf("last_operation (-want +got)\n%s", diff)
	}
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	f.clock.Advance(DefaultAsyncDelay / 2)
	if got := f.state(t, lastOpWith(id, op)); got != "in progress" {
		t.Errorf("halfway: state %q", got)
	}
	f.clock.Advance(DefaultAsyncDelay / 2)
	r = f.must(lastOpWith(id, op), 200)
	if got := r.str(t, "state"); got != "succeeded" || r.header.Get("Retry-After") != "" {
		t.Errorf("after the delay: state %q, Retry-After %q", got, r.header.Get("Retry-After"))
	}
	f.must(req{method: "GET", path: instancePath(id)}, 200)

	// Update: a new operation; the old operation string is refused.
	upd := f.must(req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true",
		body: `{"service_id":"` + ServiceID + `","parameters":{"tier":2}}`}, 202).str(t, "operation")
	if upd == op {
		t.Fatalf("update reuses operation %q", op)
	}
	f.expect(t, lastOpWith(id, op), check{status: 400})
	if got := f.state(t, lastOpWith(id, upd)); got != "in progress" {
		t.Errorf("update: state %q", got)
	}
	f.clock.Advance(DefaultAsyncDelay)
	if got := f.state(t, lastOpWith(id, upd)); got != "succeeded" {
		t.Errorf("update: state %q", got)
	}
	params := f.must(req{method: "GET", path: instancePath(id)}, 200).fields(t)["parameters"]
	if diff := cmp.Diff(map[string]any{"tier": 2.0}, params); diff != "" {
		t.Errorf("parameters after update (-want +got)\n%s", diff)
	}

	// Deprovision: 410 on last_operation once done, then the id is free.
	del := f.must(req{method: "DELETE", path: instancePath(id) + query(ServiceID, PlanAsyncID) + "&accepts_incomplete=true"}, 202).str(t, "operation")
	if got := f.state(t, lastOpWith(id, del)); got != "in progress" {
		t.Errorf("deprovision: state %q", got)
	}
	f.must(req{method: "GET", path: instancePath(id)}, 200) // still there while deleting
	f.clock.Advance(DefaultAsyncDelay)
	if r := f.must(lastOpWith(id, del), 410); string(r.body) != "{}\n" {
		t.Errorf("410 body %q, want {}", r.body)
	}
	f.must(req{method: "GET", path: instancePath(id)}, 404)
	f.must(req{method: "DELETE", path: instancePath(id) + query(ServiceID, PlanAsyncID) + "&accepts_incomplete=true"}, 410)
	f.must(provisionAsync(id), 202)
}

func TestLastOperationEdges(t *testing.T) {
	runRows(t, Options{}, []row{
		{name: "unknown instance", req: lastOp("nope"), want: check{status: 404}},
		{name: "synchronous instance", setup: []req{provisionSync(id)}, req: lastOp(id), want: check{status: 200}},
		{name: "foreign operation", setup: []req{provisionAsync(id)}, req: lastOpWith(id, "provision-999"), want: check{status: 400}},
		{name: "without operation", setup: []req{provisionAsync(id)}, req: lastOp(id), want: check{status: 200}},
		{name: "deleted synchronously", setup: []req{provisionSync(id),
			{method: "DELETE", path: instancePath(id) + query(ServiceID, PlanSyncID)}}, req: lastOp(id), want: check{status: 404}},
	})
}

func TestAsyncFailures(t *testing.T) {
	f := newFixture(t, Options{})
	get := req{method: "GET", path: instancePath(id)}
	failNext := func(endpoint string) {
		t.Helper()
		if err := f.b.InjectFault(Fault{Endpoint: endpoint, FailOperation: true, Count: 1}); err != nil {
			t.Fatal(err)
		}
	}

	failNext(EndpointProvision)
	f.must(provisionAsync(id), 202)
	f.clock.Advance(DefaultAsyncDelay)
	if got := f.state(t, lastOp(id)); got != "failed" {
		t.Errorf("failed provision: state %q", got)
	}
	f.must(get, 404)
	f.must(provisionAsync(id), 202) // the id is free again
	f.clock.Advance(DefaultAsyncDelay)
	f.must(get, 200)

	failNext(EndpointUpdate)
	f.must(req{method: "PATCH", path: instancePath(id) + "?accepts_incomplete=true",
		body: `{"service_id":"` + ServiceID + `","plan_id":"` + PlanSyncID + `"}`}, 202)
	f.clock.Advance(DefaultAsyncDelay)
	want := map[string]any{"state": "failed", "description": "Updating failed (injected fault).",
		"instance_usable": true, "update_repeatable": true}
	if diff := cmp.Diff(want, f.must(lastOp(id), 200).fields(t)); diff != "" {
		t.Errorf("failed update (-want +got)\n%s", diff)
	}
	if plan := f.must(get, 200).str(t, "plan_id"); plan != PlanAsyncID {
		t.Errorf("plan after a failed update: %s, want the old one", plan)
	}

	failNext(EndpointDeprovision)
	f.must(req{method: "DELETE", path: instancePath(id) + query(ServiceID, PlanAsyncID) + "&accepts_incomplete=true"}, 202)
	f.clock.Advance(DefaultAsyncDelay)
	if got := f.state(t, lastOp(id)); got != "failed" {
		t.Errorf("failed deprovision: state %q", got)
	}
	f.must(get, 200)
}

func TestAsyncDelayNegative(t *testing.T) {
	f := newFixture(t, Options{AsyncDelay: -1})
	f.must(provisionAsync(id), 202)
	if got := f.state(t, lastOp(id)); got != "succeeded" {
		t.Errorf("state %q, want succeeded at once", got)
	}
}
