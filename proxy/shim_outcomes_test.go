package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

// TestShimBrokerError: an error answer after the 202 ends the operation
// "failed" with the broker's description, and leaves an orphan candidate
// where the orphan-mitigation table says so (a 500 to a provision; not a
// 400).
func TestShimBrokerError(t *testing.T) {
	for _, tc := range []struct {
		name, body  string
		status      int
		description string
		orphan      bool
	}{
		{"500", `{"description":"disk full"}`, 500, "disk full", true},
		{"400", `{"error":"BadParameter","description":"size must be small"}`, 400, "size must be small", false},
		{"500 without a description", `{}`, 500, "the broker answered 500 Internal Server Error", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newShimEnv(t, shimOptions{})
			_ = e.broker.InjectFault(samplebroker.Fault{Endpoint: samplebroker.EndpointProvision, Status: tc.status, Body: tc.body, Count: 1})
			pending := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
			release := e.held(t).releaser(t)
			e.fire(t)
			op := operationOf(t, wait(t, pending))
			release()
			key := store.LockKey("b", "held1")
			e.waitShim(t, key, store.StateFailed)
			poll := e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
			want := `{"state":"failed","description":"` + tc.description + `"}`
			if poll.status != 200 || poll.body != want {
				t.Errorf("poll: %d %s, want 200 %s", poll.status, poll.body, want)
			}
			checkShimAnswer(t, "the poll failed", instancePoll, "2.15", poll, rules.Provision)
			if l := e.lock(t, key); l.Key != "" {
				t.Errorf("lock after the terminal poll: %+v", l)
			}
			orphans, _ := e.st.ListOrphans(context.Background())
			if got := len(orphans) == 1; got != tc.orphan {
				t.Errorf("orphans %+v, want a candidate: %v", orphans, tc.orphan)
			}
		})
	}
}

// TestShimBrokerTimeout: a broker that does not answer within its timeout
// after the 202 ends the operation "failed" with the gateway's timeout
// description, and the provision is an orphan candidate that takes the
// lock over: the lock is held for hold_after_timeout (the poll does not
// release it), then the undo runs under it and releases it. A poll after
// that finds the operation untracked and still says "failed".
func TestShimBrokerTimeout(t *testing.T) {
	timeout := make(chan struct{})
	e := newShimEnv(t, shimOptions{transport: timeoutTransport(timeout)})
	pending := e.send(t, "PUT", "/v2/service_instances/times-out?accepts_incomplete=true", "2.15", shimProvision)
	e.fire(t)
	op := operationOf(t, wait(t, pending))
	close(timeout)
	key := store.LockKey("b", "times-out")
	held := e.waitShim(t, key, store.StateFailed)
	if !held.Shim.Hold || !held.Deadline.Equal(e.clock.Now().Add(time.Minute)) {
		t.Errorf("lock after the timeout: %+v, want held for hold_after_timeout", held)
	}
	poll := e.call(t, "GET", "/v2/service_instances/times-out/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"failed"`) || !strings.Contains(poll.body, `did not answer within 30s`) {
		t.Errorf("poll: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the poll failed", instancePoll, "2.15", poll, rules.Provision)
	if l := e.lock(t, key); l.Owner != held.Owner {
		t.Errorf("lock after the poll: %+v, want it held", l)
	}
	orphans, _ := e.st.ListOrphans(context.Background())
	if len(orphans) != 1 || orphans[0].Kind != store.KindDeprovision || orphans[0].LockOwner != held.Owner ||
		!orphans[0].NextAttempt.Equal(e.clock.Now().Add(time.Minute)) {
		t.Fatalf("orphans %+v, want the deprovision due when the hold ends, under the lock", orphans)
	}

	e.clock.Advance(time.Minute + time.Second)
	e.g.MitigateOrphans(context.Background())
	if n := e.broker.Count(samplebroker.EndpointDeprovision); n != 1 {
		t.Errorf("%d deprovisions reached the broker, want the undo", n)
	}
	if orphans, _ := e.st.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("orphans left: %+v", orphans)
	}
	if l := e.lock(t, key); l.Key != "" {
		t.Errorf("lock after the undo: %+v", l)
	}
	poll = e.call(t, "GET", "/v2/service_instances/times-out/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"failed"`) {
		t.Errorf("poll of the untracked operation: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the untracked poll", instancePoll, "2.15", poll, rules.Unknown)
}

// TestShimBrokerTurnsAsync: a broker that answers 202 itself after the
// shim's 202 went out keeps the operation going: the polls go to the
// broker with its own operation in place of the gateway's, and its
// terminal answer releases the lock.
func TestShimBrokerTurnsAsync(t *testing.T) {
	e := newShimEnv(t, shimOptions{})
	pending := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", asyncProvision)
	release := e.held(t).releaser(t)
	e.fire(t)
	op := operationOf(t, wait(t, pending))
	release()
	key := store.LockKey("b", "held1")
	var l store.Lock
	waitFor(t, func() bool { l = e.lock(t, key); return l.Shim.BrokerAsync })
	if l.Operation != op || l.Shim.BrokerOperation == "" || l.Shim.State != store.StateInProgress {
		t.Fatalf("lock after the broker's 202: %+v", l)
	}
	poll := e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"in progress"`) {
		t.Errorf("poll in progress: %d %s", poll.status, poll.body)
	}
	before := e.broker.Count(samplebroker.EndpointLastOperation)
	e.clock.Advance(2 * time.Minute)
	poll = e.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"succeeded"`) {
		t.Errorf("poll after the broker's operation ended: %d %s", poll.status, poll.body)
	}
	if n := e.broker.Count(samplebroker.EndpointLastOperation) - before; n != 1 {
		t.Errorf("%d polls reached the broker, want 1", n)
	}
	if l := e.lock(t, key); l.Key != "" {
		t.Errorf("lock after the broker's terminal answer: %+v", l)
	}
}

// TestShimBind: a bind is shimmed only when the inventory keeps its
// credentials (inventory.secrets: encrypted), the only way the platform
// gets them after a 202; then the binding's polls are the gateway's.
// Otherwise the bind waits for the broker, as without the shim.
func TestShimBind(t *testing.T) {
	bindPath := "/v2/service_instances/i1/service_bindings/held-b1?accepts_incomplete=true"
	t.Run("encrypted", func(t *testing.T) {
		e := newShimEnv(t, shimOptions{})
		if got := e.call(t, "PUT", "/v2/service_instances/i1", "2.15", shimProvision); got.status != 201 {
			t.Fatalf("provision: %d %s", got.status, got.body)
		}
		pending := e.send(t, "PUT", bindPath, "2.15", syncBind)
		release := e.held(t).releaser(t)
		e.fire(t)
		accepted := wait(t, pending)
		op := operationOf(t, accepted)
		checkShimAnswer(t, "the bind's 202", rules.Call{Endpoint: rules.Bind, AcceptsIncomplete: true}, "2.15", accepted, rules.Unknown)
		release()
		e.waitShim(t, store.BindingLockKey("b", "i1", "held-b1"), store.StateSucceeded)
		poll := e.call(t, "GET", "/v2/service_instances/i1/service_bindings/held-b1/last_operation?operation="+op, "2.15", "")
		if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
			t.Errorf("binding poll: %d %s", poll.status, poll.body)
		}
		checkShimAnswer(t, "the binding poll", bindingPoll, "2.15", poll, rules.Bind)
	})
	t.Run("not stored", func(t *testing.T) {
		e := newShimEnv(t, shimOptions{secrets: "none"})
		if got := e.call(t, "PUT", "/v2/service_instances/i1", "2.15", shimProvision); got.status != 201 {
			t.Fatalf("provision: %d %s", got.status, got.body)
		}
		pending := e.send(t, "PUT", bindPath, "2.15", syncBind)
		e.held(t).releaser(t)()
		if got := wait(t, pending); got.status != 201 || !strings.Contains(got.body, "credentials") {
			t.Errorf("bind: %d %s", got.status, got.body)
		}
		if n := len(e.timers.started); n != 0 {
			t.Errorf("%d timers started for a bind whose credentials are not kept", n)
		}
	})
}
