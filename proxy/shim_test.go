package proxy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

var (
	shimProvision = provisionBody(samplebroker.PlanSyncID, "")
	syncBind      = fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"bind_resource":{"app_guid":"app"}}`, samplebroker.ServiceID, samplebroker.PlanSyncID)
	syncQuery     = "service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	provisionCall = rules.Call{Endpoint: rules.Provision, AcceptsIncomplete: true}
	instancePoll  = rules.Call{Endpoint: rules.InstanceLastOperation}
	bindingPoll   = rules.Call{Endpoint: rules.BindingLastOperation}
)

// TestShimSlowProvision: a provision the broker has not answered after
// async_after gets 202 with the gateway's operation; the instance stays
// locked (an update gets 400 without reaching the broker); polls say "in
// progress" until the broker answered, then "succeeded", which releases
// the lock. Every answer the gateway makes passes the response rules.
func TestShimSlowProvision(t *testing.T) {
	e := newShimEnv(t, shimOptions{})
	pending := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	release := e.held(t).releaser(t)
	e.fire(t)
	accepted := wait(t, pending)
	op := operationOf(t, accepted)
	checkShimAnswer(t, "the 202", provisionCall, "2.15", accepted, rules.Unknown)
	if accepted.header.Get("X-Broker-API-Request-Identity") == "" {
		t.Error("the 202 has no X-Broker-API-Request-Identity")
	}
	key := store.LockKey("b", "held1")
	if l := e.lock(t, key); !l.Async || l.Operation != op || l.Shim.State != store.StateInProgress || l.Shim.Replica != e.g.guard.Replica {
		t.Errorf("lock after the 202: %+v", l)
	}

	update := e.call(t, "PATCH", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", updateBody)
	if update.status != 400 || !strings.Contains(update.body, rules.InProgress) {
		t.Errorf("update during the shimmed provision: %d %s", update.status, update.body)
	}
	if n := e.broker.Count(samplebroker.EndpointUpdate); n != 0 {
		t.Errorf("the update reached the broker %d times", n)
	}
	poll := e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"in progress"`) {
		t.Errorf("poll before the broker answered: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the poll in progress", instancePoll, "2.15", poll, rules.Provision)
	if got := poll.header.Get("Retry-After"); got != "10" {
		t.Errorf("poll in progress: Retry-After %q, want poll.retry_after's 10", got)
	}

	release()
	e.waitShim(t, key, store.StateSucceeded)
	poll = e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
		t.Errorf("poll after the broker answered: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the poll succeeded", instancePoll, "2.15", poll, rules.Provision)
	if l := e.lock(t, key); l.Key != "" {
		t.Errorf("lock after the terminal poll: %+v", l)
	}
	// The platform polls once more (its answer got lost): the inventory
	// holds the operation's outcome.
	poll = e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
		t.Errorf("poll after the lock's release: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the poll after the lock's release", instancePoll, "2.15", poll, rules.Unknown)
	if got := e.call(t, "GET", "/v2/service_instances/held1", "2.15", ""); got.status != 200 {
		t.Errorf("GET instance after the provision: %d %s", got.status, got.body)
	}
	if n := e.broker.Count(samplebroker.EndpointProvision); n != 1 {
		t.Errorf("the broker saw %d provisions, want 1", n)
	}
}

// TestShimBrokerAnswersInTime: an answer before async_after reaches the
// platform as it would without the shim, byte for byte, and releases the
// lock; a call the shim may not answer for starts no timer.
func TestShimBrokerAnswersInTime(t *testing.T) {
	e := newShimEnv(t, shimOptions{})
	pending := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	close(e.held(t).release)
	got := wait(t, pending)
	if got.status != 201 || got.body != `{"dashboard_url":"https://sample-broker.invalid/dashboard/held1"}`+"\n" {
		t.Errorf("provision: %d %q", got.status, got.body)
	}
	if l := e.lock(t, store.LockKey("b", "held1")); l.Key != "" {
		t.Errorf("lock after the answer: %+v", l)
	}
	<-e.timers.started // the provision's, never fired

	// Not shimmed: a call without accepts_incomplete, a read.
	for _, c := range []struct{ method, path, body string }{
		{"PUT", "/v2/service_instances/i2", shimProvision},
		{"GET", "/v2/service_instances/i2", ""},
	} {
		if got := e.call(t, c.method, c.path, "2.15", c.body); got.status != 201 && got.status != 200 {
			t.Errorf("%s %s: %d %s", c.method, c.path, got.status, got.body)
		}
	}
	if n := len(e.timers.started); n != 0 {
		t.Errorf("%d timers started for calls the shim may not answer for", n)
	}
}
