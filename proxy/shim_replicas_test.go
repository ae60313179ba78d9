package proxy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/rules"
)

// TestShimRedisReplicas: two gateways on one Redis. Replica B answers the
// polls of the operation replica A shimmed and runs the broker call of,
// and refuses an update meanwhile; a second operation, whose replica dies
// with its call in flight, is settled "failed" by the first poll after the
// time its call must have ended, with an orphan candidate for the
// provision, once a challenge of the dead replica went unanswered.
func TestShimRedisReplicas(t *testing.T) {
	r := storetest.StartRedis(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store {
		return openStore(t, store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock)
	}
	a := newShimEnv(t, shimOptions{store: open(), clock: clock})
	b := newShimEnv(t, shimOptions{store: open(), clock: clock, broker: a.broker})

	pending := a.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	release := a.held(t).releaser(t)
	a.fire(t)
	op := operationOf(t, wait(t, pending))
	poll := b.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || !strings.Contains(poll.body, `"state":"in progress"`) {
		t.Errorf("replica B's poll before the broker answered: %d %s", poll.status, poll.body)
	}
	if got := b.call(t, "PATCH", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", updateBody); got.status != 400 {
		t.Errorf("update through replica B: %d %s", got.status, got.body)
	}
	release()
	key := store.LockKey("b", "held1")
	b.waitShim(t, key, store.StateSucceeded)
	poll = b.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
		t.Errorf("replica B's poll after the broker answered: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "replica B's poll", instancePoll, "2.15", poll, rules.Provision)
	if l := a.lock(t, key); l.Key != "" {
		t.Errorf("lock after the terminal poll: %+v", l)
	}

	// Replica A dies with its call in flight (the broker holds it).
	pending = a.send(t, "PUT", "/v2/service_instances/held2?accepts_incomplete=true", "2.15", shimProvision)
	a.held(t).releaser(t)
	a.fire(t)
	op = operationOf(t, wait(t, pending))
	clock.Advance(30*time.Second + guard.SyncHoldMargin - time.Second)
	poll = b.call(t, "GET", "/v2/service_instances/held2/last_operation?operation="+op, "2.15", "")
	if !strings.Contains(poll.body, `"state":"in progress"`) {
		t.Errorf("poll before the call's time is over: %d %s", poll.status, poll.body)
	}
	clock.Advance(time.Second)
	poll = b.call(t, "GET", "/v2/service_instances/held2/last_operation?operation="+op, "2.15", "")
	if !strings.Contains(poll.body, `"state":"in progress"`) {
		t.Errorf("poll that challenges the lost replica: %d %s", poll.status, poll.body)
	}
	clock.Advance(emulate.ShimLostGrace)
	poll = b.call(t, "GET", "/v2/service_instances/held2/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"failed","description":"`+emulate.ShimLost+`"}` {
		t.Errorf("poll once the challenge went unanswered: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the poll of a lost operation", instancePoll, "2.15", poll, rules.Provision)
	// The broker may still be at work: the lock is held for
	// hold_after_timeout (1m) from now, and the undo is due then.
	holdEnds := clock.Now().Add(time.Minute)
	if l := b.lock(t, store.LockKey("b", "held2")); !l.Shim.Hold || !l.Deadline.Equal(holdEnds) {
		t.Errorf("lock after the lost operation's poll: %+v, want held until %s", l, holdEnds)
	}
	orphans, _ := b.st.ListOrphans(context.Background())
	if len(orphans) != 1 || orphans[0].InstanceID != "held2" || !orphans[0].NextAttempt.Equal(holdEnds) || orphans[0].LockOwner == "" {
		t.Errorf("orphans %+v, want the lost provision's undo, due when the hold ends", orphans)
	}
}

// TestShimRestartOnBolt: a gateway that opens the bolt file of one that
// ended with a shimmed call in flight settles that operation "failed" as
// it starts, with an orphan candidate for the provision: nothing is left
// in progress. The poll that reports it leaves the lock held until the
// broker call must be over.
func TestShimRestartOnBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	state := "{backend: bolt, path: " + path + "}"
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store { return openStore(t, store.Config{Backend: store.BackendBolt, Path: path}, clock) }
	stA := open()
	a := newShimEnv(t, shimOptions{state: state, store: stA, clock: clock})
	pending := a.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	a.held(t).releaser(t)
	a.fire(t)
	op := operationOf(t, wait(t, pending))
	stA.Close() // the first gateway's process ends

	b := newShimEnv(t, shimOptions{state: state, store: open(), clock: clock, broker: a.broker})
	key := store.LockKey("b", "held1")
	if l := b.lock(t, key); l.Shim.State != store.StateFailed || l.Shim.Description != emulate.ShimLost {
		t.Errorf("lock after the restart: %+v", l)
	}
	orphans, _ := b.st.ListOrphans(context.Background())
	if len(orphans) != 1 || orphans[0].Kind != store.KindDeprovision || !strings.Contains(orphans[0].Reason, emulate.ShimLost) {
		t.Errorf("orphans %+v, want the provision's undo", orphans)
	}
	poll := b.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"failed","description":"`+emulate.ShimLost+`"}` {
		t.Errorf("poll after the restart: %d %s", poll.status, poll.body)
	}
	if l := b.lock(t, key); !l.Shim.Hold {
		t.Errorf("lock after the poll: %+v, want held", l)
	}
}

// TestShimBindingPollOldBroker: a bind with accepts_incomplete=true to a
// broker below 2.14 reaches it without the flag (it has no asynchronous
// bindings) and is shimmed like any slow synchronous call; the binding's
// last_operation, which the broker does not have, is answered when it
// polls an operation the shim owns, tracked (its lock) or not (a delete
// the inventory no longer holds: 410), and refused 412 otherwise, as
// without the shim.
func TestShimBindingPollOldBroker(t *testing.T) {
	e := newShimEnv(t, shimOptions{max: "2.13"})
	if got := e.call(t, "PUT", "/v2/service_instances/i1", "2.14", shimProvision); got.status != 201 {
		t.Fatalf("provision: %d %s", got.status, got.body)
	}
	pending := e.send(t, "PUT", "/v2/service_instances/i1/service_bindings/held-b1?accepts_incomplete=true", "2.14", syncBind)
	held := e.held(t)
	release := held.releaser(t)
	if strings.Contains(held.r.URL.RawQuery, "accepts_incomplete") {
		t.Errorf("the 2.13 broker got the bind with %q", held.r.URL.RawQuery)
	}
	e.fire(t)
	accepted := wait(t, pending)
	op := operationOf(t, accepted)
	checkShimAnswer(t, "the bind's 202", rules.Call{Endpoint: rules.Bind, AcceptsIncomplete: true}, "2.14", accepted, rules.Unknown)
	release()
	key := store.BindingLockKey("b", "i1", "held-b1")
	e.waitShim(t, key, store.StateSucceeded)
	path := "/v2/service_instances/i1/service_bindings/held-b1/last_operation?operation="
	poll := e.call(t, "GET", path+op, "2.14", "")
	if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
		t.Errorf("poll of the shim's operation: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the binding poll", bindingPoll, "2.14", poll, rules.Bind)
	if l := e.lock(t, key); l.Key != "" {
		t.Errorf("lock after the poll: %+v", l)
	}
	poll = e.call(t, "GET", "/v2/service_instances/i1/service_bindings/b2/last_operation?operation="+emulate.ShimOperationPrefix+"unbind-2", "2.14", "")
	if poll.status != 410 || poll.body != `{}` {
		t.Errorf("poll of an untracked unbind: %d %s", poll.status, poll.body)
	}
	checkShimAnswer(t, "the untracked unbind's poll", bindingPoll, "2.14", poll, rules.Unknown)
	poll = e.call(t, "GET", path+"brokers-own", "2.14", "")
	if poll.status != 412 || !strings.Contains(poll.body, "speaks at most 2.13") {
		t.Errorf("poll of another operation: %d %s", poll.status, poll.body)
	}
	if n := e.broker.Count(samplebroker.EndpointBindingLastOperation); n != 0 {
		t.Errorf("%d binding polls reached the 2.13 broker", n)
	}
}

// TestShimLifecycle: every call the shim answers for gets the
// specification's 202 at the platform's version, and every poll of it the
// specification's last_operation answer.
func TestShimLifecycle(t *testing.T) {
	for _, version := range []string{"2.8", "2.14", "2.17"} {
		t.Run(version, func(t *testing.T) {
			bindings := osb.MustParseVersion(version).AtLeast(osb.MustParseVersion("2.14"))
			e := newShimEnv(t, shimOptions{})
			sync := func(method, path, body string) {
				t.Helper()
				pending := e.send(t, method, path, version, body)
				e.held(t).releaser(t)()
				if got := wait(t, pending); got.status != 201 && got.status != 200 {
					t.Fatalf("%s %s: %d %s", method, path, got.status, got.body)
				}
			}
			shimmed := func(ep rules.Endpoint, method, path, body, key, pollPath string) {
				t.Helper()
				pending := e.send(t, method, path, version, body)
				release := e.held(t).releaser(t)
				e.fire(t)
				accepted := wait(t, pending)
				op := operationOf(t, accepted)
				checkShimAnswer(t, ep.String()+"'s 202", rules.Call{Endpoint: ep, AcceptsIncomplete: true}, version, accepted, rules.Unknown)
				pollCall := instancePoll
				if strings.Contains(pollPath, "service_bindings") {
					pollCall = bindingPoll
				}
				poll := e.call(t, "GET", pollPath+"?operation="+op, version, "")
				checkShimAnswer(t, ep.String()+"'s poll in progress", pollCall, version, poll, ep)
				release()
				e.waitShim(t, key, store.StateSucceeded)
				poll = e.call(t, "GET", pollPath+"?operation="+op, version, "")
				if poll.body != `{"state":"succeeded"}` {
					t.Errorf("%s's poll: %d %s", ep, poll.status, poll.body)
				}
				checkShimAnswer(t, ep.String()+"'s poll succeeded", pollCall, version, poll, ep)
			}
			inst := "/v2/service_instances/held9"
			ikey := store.LockKey("b", "held9")
			sync("PUT", inst, shimProvision)
			if bindings {
				bind := inst + "/service_bindings/b1"
				sync("PUT", bind, syncBind)
				shimmed(rules.Unbind, "DELETE", bind+"?accepts_incomplete=true&"+syncQuery, "",
					store.BindingLockKey("b", "held9", "b1"), bind+"/last_operation")
			}
			shimmed(rules.Update, "PATCH", inst+"?accepts_incomplete=true", updateBody, ikey, inst+"/last_operation")
			shimmed(rules.Deprovision, "DELETE", inst+"?accepts_incomplete=true&"+syncQuery, "", ikey, inst+"/last_operation")
		})
	}
}
