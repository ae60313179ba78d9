package samplebroker

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const bid = "bind-1"

func bindReq(body string, acceptsIncomplete bool) req {
	p := bindingPath(id, bid)
	if acceptsIncomplete {
		p += "?accepts_incomplete=true"
	}
	return req{method: "PUT", path: p, body: body}
}

func unbindReq(planID string, acceptsIncomplete bool) req {
	p := bindingPath(id, bid) + query(ServiceID, planID)
	if acceptsIncomplete {
		p += "&accepts_incomplete=true"
	}
	return req{method: "DELETE", path: p}
}

func TestBind(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	syncBind := bindReq(bindBody(ServiceID, PlanSyncID, ""), false)
	asyncBind := bindReq(bindBody(ServiceID, PlanAsyncID, ""), true)
	runRows(t, Options{}, []row{
		{name: "created", setup: []req{sync}, req: syncBind, want: check{status: 201}},
		{name: "identical repeat", setup: []req{sync, syncBind}, req: syncBind, want: check{status: 200}},
		{name: "other parameters conflict", setup: []req{sync, syncBind},
			req: bindReq(bindBody(ServiceID, PlanSyncID, `{"role":"admin"}`), false), want: check{status: 409}},
		{name: "other app conflicts", setup: []req{sync, syncBind},
			req: bindReq(`{"service_id":"`+ServiceID+`","plan_id":"`+PlanSyncID+`","app_guid":"other"}`, false), want: check{status: 409}},
		{name: "async", setup: []req{async, tick}, req: asyncBind, want: check{status: 202}},
		{name: "async plan without accepts_incomplete", setup: []req{async, tick},
			req: bindReq(asyncBind.body, false), want: check{status: 201}},
		{name: "async plan at 2.13", setup: []req{async, tick},
			req: req{method: "PUT", path: asyncBind.path, body: asyncBind.body, version: "2.13"}, want: check{status: 201}},
		{name: "async repeat while in progress", setup: []req{async, tick, asyncBind}, req: asyncBind, want: check{status: 202}},
		{name: "async conflict while in progress", setup: []req{async, tick, asyncBind},
			req: bindReq(bindBody(ServiceID, PlanAsyncID, `{"x":1}`), true), want: check{status: 409}},
		{name: "while the instance provisions", setup: []req{async}, req: asyncBind, want: check{422, "ConcurrencyError"}},
		{name: "non-bindable service", setup: []req{put(provisionBody(NoBindServiceID, NoBindPlanID, ""))},
			req: bindReq(bindBody(NoBindServiceID, NoBindPlanID, ""), false), want: check{status: 400}},
		{name: "unknown instance", req: syncBind, want: check{status: 404}},
		{name: "service of another instance", setup: []req{sync},
			req: bindReq(bindBody(NoBindServiceID, NoBindPlanID, ""), false), want: check{status: 400}},
		{name: "missing service_id", setup: []req{sync}, req: bindReq(`{"plan_id":"`+PlanSyncID+`"}`, false), want: check{status: 400}},
		{name: "missing plan_id", setup: []req{sync}, req: bindReq(`{"service_id":"`+ServiceID+`"}`, false), want: check{status: 400}},
		{name: "unknown plan", setup: []req{sync}, req: bindReq(bindBody(ServiceID, "nope", ""), false), want: check{status: 400}},
		{name: "malformed JSON", setup: []req{sync}, req: bindReq(`{"service_id"`, false), want: check{status: 400}},
		{name: "bind_resource not an object", setup: []req{sync},
			req: bindReq(`{"service_id":"`+ServiceID+`","plan_id":"`+PlanSyncID+`","bind_resource":[]}`, false), want: check{status: 400}},
	})
}

func TestBindBodies(t *testing.T) {
	f := newFixture(t, Options{})
	f.must(provisionSync(id), 201)
	created := f.must(bindReq(bindBody(ServiceID, PlanSyncID, `{"role":"ro"}`), false), 201).fields(t)
	creds, _ := created["credentials"].(map[string]any)
	for _, k := range []string{"uri", "username", "password"} {
		if s, _ := creds[k].(string); s == "" {
			t.Errorf("credentials.%s is empty in %v", k, created)
		}
	}
	repeat := f.must(bindReq(bindBody(ServiceID, PlanSyncID, `{"role":"ro"}`), false), 200).fields(t)
	if diff := cmp.Diff(created, repeat); diff != "" {
		t.Errorf("identical repeat returns other credentials (-201 +200)\n%s", diff)
	}
	got := f.must(req{method: "GET", path: bindingPath(id, bid)}, 200).fields(t)
	want := map[string]any{"credentials": creds, "parameters": map[string]any{"role": "ro"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET binding (-want +got)\n%s", diff)
	}
}

func TestUnbind(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	syncBind := bindReq(bindBody(ServiceID, PlanSyncID, ""), false)
	asyncBind := bindReq(bindBody(ServiceID, PlanAsyncID, ""), true)
	runRows(t, Options{}, []row{
		{name: "sync", setup: []req{sync, syncBind}, req: unbindReq(PlanSyncID, false), want: check{status: 200}},
		{name: "gone", setup: []req{sync}, req: unbindReq(PlanSyncID, false), want: check{status: 410}},
		{name: "twice", setup: []req{sync, syncBind, unbindReq(PlanSyncID, false)}, req: unbindReq(PlanSyncID, false), want: check{status: 410}},
		{name: "instance gone", req: unbindReq(PlanSyncID, false), want: check{status: 410}},
		{name: "missing plan_id", setup: []req{sync, syncBind},
			req: req{method: "DELETE", path: bindingPath(id, bid) + "?service_id=" + ServiceID}, want: check{status: 400}},
		{name: "missing service_id", setup: []req{sync, syncBind},
			req: req{method: "DELETE", path: bindingPath(id, bid) + "?plan_id=" + PlanSyncID}, want: check{status: 400}},
		{name: "async", setup: []req{async, tick, asyncBind, tick}, req: unbindReq(PlanAsyncID, true), want: check{status: 202}},
		{name: "async plan without accepts_incomplete", setup: []req{async, tick, asyncBind, tick},
			req: unbindReq(PlanAsyncID, false), want: check{status: 200}},
		{name: "while binding", setup: []req{async, tick, asyncBind},
			req: unbindReq(PlanAsyncID, true), want: check{422, "ConcurrencyError"}},
	})
}

// TestAsyncOnlyBindings: with AsyncOnlyBindings, binds and unbinds of the
// async plan need accepts_incomplete=true from 2.14 on; the sync plan, an
// identical repeat of a finished bind, and 2.13 are served as before.
func TestAsyncOnlyBindings(t *testing.T) {
	sync, async := provisionSync(id), provisionAsync(id)
	asyncBind := bindReq(bindBody(ServiceID, PlanAsyncID, ""), true)
	flaglessBind := bindReq(asyncBind.body, false)
	runRows(t, Options{AsyncOnlyBindings: true}, []row{
		{name: "bind without accepts_incomplete", setup: []req{async, tick}, req: flaglessBind, want: check{422, "AsyncRequired"}},
		{name: "bind with accepts_incomplete", setup: []req{async, tick}, req: asyncBind, want: check{status: 202}},
		{name: "identical repeat of a finished bind", setup: []req{async, tick, asyncBind, tick}, req: flaglessBind, want: check{status: 200}},
		{name: "bind at 2.13", setup: []req{async, tick},
			req: req{method: "PUT", path: flaglessBind.path, body: flaglessBind.body, version: "2.13"}, want: check{status: 201}},
		{name: "sync plan", setup: []req{sync}, req: bindReq(bindBody(ServiceID, PlanSyncID, ""), false), want: check{status: 201}},
		{name: "unbind without accepts_incomplete", setup: []req{async, tick, asyncBind, tick},
			req: unbindReq(PlanAsyncID, false), want: check{422, "AsyncRequired"}},
		{name: "unbind with accepts_incomplete", setup: []req{async, tick, asyncBind, tick},
			req: unbindReq(PlanAsyncID, true), want: check{status: 202}},
	})
	runRows(t, Options{AsyncOnlyBindings: true, Legacy: true}, []row{
		{name: "legacy binds synchronously", setup: []req{async, tick}, req: flaglessBind, want: check{status: 201}},
	})
}

func TestGetBinding(t *testing.T) {
	syncBind := bindReq(bindBody(ServiceID, PlanSyncID, ""), false)
	get := req{method: "GET", path: bindingPath(id, bid)}
	runRows(t, Options{}, []row{
		{name: "bound", setup: []req{provisionSync(id), syncBind}, req: get, want: check{status: 200}},
		{name: "unknown binding", setup: []req{provisionSync(id)}, req: get, want: check{status: 404}},
		{name: "unknown instance", req: get, want: check{status: 404}},
		{name: "while binding", setup: []req{provisionAsync(id), tick, bindReq(bindBody(ServiceID, PlanAsyncID, ""), true)},
			req: get, want: check{status: 404}},
	})
}

func TestAsyncBindingLifecycle(t *testing.T) {
	f := newFixture(t, Options{})
	bindingLastOp := func(op string) req {
		return req{method: "GET", path: bindingPath(id, bid) + "/last_operation" + query(ServiceID, PlanAsyncID) + "&operation=" + op}
	}
	f.must(provisionAsync(id), 202)
	f.clock.Advance(DefaultAsyncDelay)
	f.expect(t, bindingLastOp(""), check{status: 404})

	op := f.must(bindReq(bindBody(ServiceID, PlanAsyncID, ""), true), 202).str(t, "operation")
	if got := f.state(t, bindingLastOp(op)); got != "in progress" {
		t.Errorf("bind: state %q", got)
	}
	f.expect(t, bindingLastOp("bind-0"), check{status: 400})
	f.clock.Advance(DefaultAsyncDelay)
	if got := f.state(t, bindingLastOp(op)); got != "succeeded" {
		t.Errorf("bind: state %q", got)
	}
	creds := f.must(req{method: "GET", path: bindingPath(id, bid)}, 200).fields(t)["credentials"]
	if creds == nil {
		t.Error("GET binding has no credentials")
	}

	op = f.must(unbindReq(PlanAsyncID, true), 202).str(t, "operation")
	if got := f.state(t, bindingLastOp(op)); got != "in progress" {
		t.Errorf("unbind: state %q", got)
	}
	f.clock.Advance(DefaultAsyncDelay)
	f.expect(t, bindingLastOp(op), check{status: http.StatusGone})
	f.must(req{method: "GET", path: bindingPath(id, bid)}, 404)
	f.must(unbindReq(PlanAsyncID, true), 410)

	// A failed bind leaves no binding.
	if err := f.b.InjectFault(Fault{Endpoint: EndpointBind, FailOperation: true, Count: 1}); err != nil {
		t.Fatal(err)
	}
	f.must(bindReq(bindBody(ServiceID, PlanAsyncID, ""), true), 202)
	f.clock.Advance(DefaultAsyncDelay)
	r := f.must(req{method: "GET", path: bindingPath(id, bid) + "/last_operation"}, 200)
	if got := r.str(t, "state"); got != "failed" || !strings.Contains(r.str(t, "description"), "Binding failed") {
		t.Errorf("failed bind: %s", r.body)
	}
	f.must(req{method: "GET", path: bindingPath(id, bid)}, 404)
}
