package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The rows the fault campaign (bench/campaign, docs/faults.md#the-campaign)
// taught: each is a violation a campaign found, kept as a row of the fault
// table with the behaviour of its fix.
func init() { faultTable = append(faultTable, campaignRows...) }

var campaignRows = []faultRow{
	{
		// Campaign seed 1 (bolt): a platform hung up right after its async
		// bind's 202 was written, so it never learned the operation and
		// never polled; its orphan-mitigation DELETE got 400 "in
		// progress" until the plan's maximum_polling_duration, though the
		// broker was done in a second. The gateway now polls an async
		// operation older than state.watch_after itself and settles it.
		name: "campaign: the platform loses an async provision's 202 and never polls",
		steps: []faultStep{
			{call: hangUpFINProvisionAsync, during: hangUp,
				want: state{saw: saw{0, "hung up (FIN)"}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: deprovisionAsync, // the platform's orphan mitigation, while the operation is young
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: deprovisionAsync, advance: 5*time.Minute + time.Second, arm: sweepOperations, // past state.watch_after: the sweep polled and settled it
				want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}},
			{call: poll,
				want: state{saw: saw{410, ""}, calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 1}}}, // gone: the deletion ended
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 1}},
		retried: []faultStep{{call: provisionAsync,
			want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"},
				calls: calls{"provision": 2, "instance_last_operation": 2, "deprovision": 1}}}},
	},
	{
		// Campaign seed 7 (Redis, 2 replicas): Redis paused while a call
		// took its lock; the SET NX timed out (503, nothing sent to the
		// broker), but Redis ran it when it woke, and the lock nobody held
		// blocked the instance until its deadline (timeout + 60 s). The
		// replica now releases, by its owner token, every lock whose
		// acquire the store did not confirm, once the store answers.
		name: "campaign: store paused while a call takes its lock",
		env:  redisEnv,
		steps: []faultStep{{call: provision, arm: pauseStore, after: resumeStore,
			want: state{saw: saw{503, "operation state is unavailable"}}}},
		mitigated: &state{},
		retried: []faultStep{{call: provision,
			want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}}},
	},
	{
		// Campaign seed 8 (bolt): the gateway was killed during a bind the
		// broker finished after the kill. The dead call's lock held to
		// its deadline, then went; the inventory never saw the binding,
		// so the platform's orphan-mitigation unbind got emulate.gone's
		// 410, and the binding stayed at the broker, named by nothing.
		// A provision's or bind's lock that reaches its deadline now
		// leaves an orphan candidate (unless the inventory recorded its
		// success: then the platform may hold it). The dead replica is
		// played by a lock no gateway settles and a bind sent to the
		// broker directly.
		name: "campaign: kill -9 during a bind the broker finishes after the kill",
		opts: faultOptions{gone: true},
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}},
			{call: unbindK, arm: deadReplicaBinds, // the platform's orphan mitigation, while the dead call's lock holds
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i/k bind"}, calls: calls{"provision": 1, "bind": 1},
					inventory: []string{"instance i succeeded"}}},
			{call: unbindK, advance: time.Minute + 6*time.Second, arm: sweepOperations, // past the lock's deadline
				want: state{saw: saw{410, ""}, orphans: []string{"unbind i/k queued"}, calls: calls{"provision": 1, "bind": 1},
					inventory: []string{"instance i succeeded"}}},
		},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "bind": 1, "unbind": 1}, inventory: []string{"instance i succeeded"}},
		retried: []faultStep{{call: bind, // the binding the platform asks for again is its own: never undone
			want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "bind": 2}, inventory: []string{"binding i/k succeeded", "instance i succeeded"}}}},
	},
	{
		// Campaign seed 8 (bolt): the link reset the connection after the
		// broker had taken an async unbind (202, its answer lost): the
		// gateway answered 502 and released the lock at once, and the
		// platform's retry reached the broker during that unbind. A call
		// that may have reached the broker and got no answer now holds its
		// lock for hold_after_timeout, as after a timeout; a provision or
		// bind is an orphan candidate, due when the hold ends.
		name: "campaign: broker connection reset after the request",
		opts: faultOptions{timeout: 500 * time.Millisecond}, // hold_after_timeout: the same
		steps: []faultStep{
			{call: provision, arm: resetAfterBroker("provision"),
				want: state{saw: saw{502, `broker "b" reset the connection before it answered`},
					locks: []string{"b/i provision"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{
			{call: provision, // within the hold: the broker may still be at work
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision"}, orphans: []string{"deprovision i queued"},
					calls: calls{"provision": 1}}},
			{call: provision, advance: time.Second, // the hold is over: the broker had made it
				want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}},
		},
	},
	{
		// Campaign seed 8 (bolt): the legacy broker answered a deprovision
		// 202 with a body that is not JSON (and deleted nothing). The
		// gateway kept it as an async deletion; with no operation id to
		// tell them apart, the poll after it (the gateway's own, as
		// nobody could poll it) read the broker's answer about its
		// previous operation, "succeeded", and the inventory dropped the
		// instance: the platform's retry then got emulate.gone's 410, and
		// the instance stayed at the broker, named by nothing. Such a 202
		// is no operation now: the inventory keeps the record whole and
		// the lock is held for hold_after_timeout, as after a timeout.
		name: "campaign: a 202 that is not JSON to a deprovision",
		opts: faultOptions{timeout: 500 * time.Millisecond}, // hold_after_timeout: the same
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}, inventory: []string{"instance i succeeded"}}},
			{call: rawDeprovision, arm: inject(samplebroker.Fault{Endpoint: "deprovision", Status: 202, Body: "<html>Bad Gateway</html>", Count: 1}),
				want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision"}, calls: calls{"provision": 1, "deprovision": 1},
					inventory: []string{"instance i succeeded"}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "deprovision": 1}, inventory: []string{"instance i succeeded"}},
		retried: []faultStep{
			{call: rawDeprovision, // within the hold
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i deprovision"}, calls: calls{"provision": 1, "deprovision": 1},
					inventory: []string{"instance i succeeded"}}},
			{call: rawDeprovision, advance: time.Second,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "deprovision": 2}, inventory: []string{}}},
		},
	},
	{
		// Campaign seed 202 (Redis, 3 replicas): the undo of a timed-out
		// provision got 202 and the orphan was dropped as mitigated; the
		// broker's asynchronous deletion then failed, and the instance
		// stayed, named by nothing. An undo's 202 now keeps the orphan,
		// and the lock as the deletion's async operation; the next
		// attempts poll the deletion and send it again if it failed
		// (proxy: TestUndoWhoseAsyncDeletionFailsIsTriedAgain follows it
		// to the end).
		name: "campaign: the undo's asynchronous deletion",
		opts: faultOptions{timeout: 500 * time.Millisecond},
		steps: []faultStep{
			{call: provisionAsync, arm: resetAfterBroker("provision"),
				want: state{saw: saw{502, `broker "b" reset the connection before it answered`},
					locks: []string{"b/i provision"}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		// The lock stays as the deletion's async operation: no platform
		// call overlaps it (the 30-minute campaign's seed 1 on bolt saw an
		// unbind reach the broker during the undo's own).
		mitigated: &state{undo: []int{202}, locks: []string{"b/i deprovision async"}, orphans: []string{"deprovision i queued"},
			calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{
			{call: provisionAsync, advance: time.Second, // the broker had made it: the platform's own now, never undone
				want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}},
		},
	},
	{
		// The 30-minute campaign (seed 1, bolt): the same for a bind: its
		// success keeps the lock until the answer is written (whether the
		// platform got it decides the orphan), and the delivery of a 202
		// left the lock to be the async operation it is not, so the
		// binding stayed locked until the call's deadline (a minute past
		// hold_after_timeout). A malformed 202 is held, then released.
		name: "campaign: a 202 that is not JSON to a bind",
		opts: faultOptions{timeout: 500 * time.Millisecond},
		steps: []faultStep{
			{call: provision, want: state{saw: saw{201, ""}, calls: calls{"provision": 1}}},
			{call: rawBind, arm: inject(samplebroker.Fault{Endpoint: "bind", Status: 202, Body: "<html>Bad Gateway</html>", Count: 1}),
				want: state{saw: saw{202, ""}, locks: []string{"b/i/k bind"}, orphans: []string{"unbind i/k queued"}, calls: calls{"provision": 1, "bind": 1}}},
		},
		mitigated: &state{undo: []int{410}, calls: calls{"provision": 1, "bind": 1, "unbind": 1}},
		retried: []faultStep{
			{call: rawBind, advance: time.Second, // the hold is over
				want: state{saw: saw{201, ""}, calls: calls{"provision": 1, "bind": 2}}},
		},
	},
	{
		// The 30-minute campaign (seed 1, Redis, 2 replicas): the replica
		// running a shimmed provision was killed as the call timed out,
		// after it wrote the outcome (failed, held) and before its orphan
		// candidate: polls said "failed", the lock ran out at its
		// deadline, and the instance the broker made stayed, named by
		// nothing. A shimmed provision's or bind's lock that reaches its
		// deadline without a success now leaves a candidate too. The dead
		// replica is played by the lock it leaves and a provision sent to
		// the broker directly.
		name: "campaign: kill -9 as a shimmed provision times out",
		steps: []faultStep{
			{call: poll, arm: deadShimReplica, // the outcome the dead replica wrote
				want: state{saw: saw{200, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, advance: time.Minute + 6*time.Second, arm: sweepOperations, // past the lock's deadline
				want: state{saw: saw{200, ""}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
		},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision, // the platform's own now: never undone
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2, "instance_last_operation": 1}}}},
	},
	{
		// The 30-minute campaign (seed 1, Redis, 2 replicas): Redis paused
		// while a platform polled an async provision; the gateway could
		// not read the lock, so the broker's "succeeded" went through and
		// the retry queue released the lock once Redis was back, but the
		// inventory kept "in progress", so emulate.fetch answered 404 to
		// an instance the platform was told exists, for as long as nothing
		// else touched it. The retry queue now records the outcome too,
		// under the lock, before it releases it.
		name: "campaign: store paused during a poll that ends an operation",
		env:  redisEnv,
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1},
				inventory: []string{"instance i in progress"}}},
			{call: poll, arm: pauseStore, after: resumeStore,
				want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1},
					inventory: []string{"instance i succeeded"}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 1}, inventory: []string{"instance i succeeded"}},
		retried: []faultStep{{call: provisionAsync,
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2, "instance_last_operation": 1}, inventory: []string{"instance i succeeded"}}}},
	},
	{
		// The 30-minute campaign (seed 3, bolt): the gateway was killed
		// during a provision the broker finished after the kill; the
		// platform's DELETE came 60 ms after the dead call's lock reached
		// its deadline, before the sweep released it, and took the key
		// over. No orphan candidate was left (the sweep never saw the
		// lock), emulate.gone answered 410, and the instance stayed at the
		// broker, named by nothing. A call that takes the key over from an
		// expired lock now does what the sweep does with it.
		name: "campaign: a DELETE takes over an expired provision lock before the sweep",
		opts: faultOptions{gone: true},
		steps: []faultStep{
			{call: deprovision, arm: deadReplicaProvisions, // the platform's orphan mitigation, while the dead call's lock holds
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i provision"}, calls: calls{"provision": 1}}},
			{call: deprovision, advance: time.Minute + 6*time.Second, // past the lock's deadline; no sweep has run
				want: state{saw: saw{410, ""}, orphans: []string{"deprovision i queued"}, calls: calls{"provision": 1}}},
		},
		mitigated: &state{undo: []int{200}, calls: calls{"provision": 1, "deprovision": 1}},
		retried: []faultStep{{call: provision, // the platform's own now: never undone
			want: state{saw: saw{200, ""}, calls: calls{"provision": 2}}}},
	},
	{
		// The 30-minute campaign (seed 3, Redis, 2 replicas): Redis paused
		// as the broker accepted an async unbind. The 202 reached the
		// platform, but its lock stayed the call's own (the write that
		// makes it the async operation failed, and the retry queue only
		// cancelled the orphan), so the platform's poll, which found the
		// operation over, could not release it, and the binding was
		// blocked to the call's deadline (64 s). The retry queue now
		// makes the lock the async operation once the store is back.
		name: "campaign: store down as an async deprovision is accepted",
		env:  redisEnv,
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
			{call: deprovisionAsync, during: stopStore, after: startStore,
				want: state{saw: saw{202, ""}, locks: []string{"b/i deprovision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}},
			{call: poll, // the deletion ended: the poll releases its lock
				want: state{saw: saw{410, ""}, calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 1}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 1}},
		retried: []faultStep{{call: provisionAsync,
			want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"},
				calls: calls{"provision": 2, "instance_last_operation": 2, "deprovision": 1}}}},
	},
	{
		// The 30-minute campaign (seed 3, Redis, 2 replicas): a platform
		// hung up (a reset) while the broker, slowed by a fault, took an
		// async deprovision; its 202 came after, to nobody. The gateway
		// released the lock, and the platform's retry reached the broker
		// during that deletion (e). A 202 to a platform gone keeps the lock
		// as the async operation, which the reconciler settles.
		name: "campaign: the platform hangs up before an async deprovision's 202",
		steps: []faultStep{
			{call: provisionAsync, want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"}, calls: calls{"provision": 1}}},
			{call: poll, want: state{saw: saw{200, ""}, calls: calls{"provision": 1, "instance_last_operation": 1}}},
			{call: hangUpRSTDeprovisionAsync, during: resetAndGone,
				want: state{saw: saw{0, "hung up (reset)"}, locks: []string{"b/i deprovision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}},
			{call: deprovisionAsync, // the platform's retry, during the broker's deletion
				want: state{saw: saw{400, proxy.InProgress}, locks: []string{"b/i deprovision async"},
					calls: calls{"provision": 1, "instance_last_operation": 1, "deprovision": 1}}},
			{call: deprovisionAsync, advance: 5*time.Minute + time.Second, arm: sweepOperations, // the reconciler settled it
				want: state{saw: saw{410, ""}, calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 2}}},
		},
		mitigated: &state{calls: calls{"provision": 1, "instance_last_operation": 2, "deprovision": 2}},
		retried: []faultStep{{call: provisionAsync,
			want: state{saw: saw{202, ""}, locks: []string{"b/i provision async"},
				calls: calls{"provision": 2, "instance_last_operation": 2, "deprovision": 2}}}},
	},
}

// hangUpRSTDeprovisionAsync is an async deprovision whose platform resets
// its connection while the broker holds the call.
var hangUpRSTDeprovisionAsync = platformCall{"async deprovision, the platform hanging up with a reset", samplebroker.EndpointDeprovision,
	func(c osb.Client, id string) error {
		return rawSend(baseOf(c), http.MethodDelete, instancePath(id)+"?accepts_incomplete=true&service_id="+serviceID+"&plan_id="+asyncPlan, "", hangUpRST)
	}}

// deadReplicaProvisions leaves what a replica killed mid-provision
// leaves: its lock, which no gateway will settle (deadline: the broker
// timeout, 5s, plus a minute), and the instance the broker made after the
// kill.
func deadReplicaProvisions(t *testing.T, f *faultEnv) {
	t.Helper()
	now := f.clock.Now()
	l := store.Lock{Key: store.LockKey(faultBroker, "i"), Owner: "killed-replica-call", Kind: store.KindProvision, Tenant: "t",
		Broker: faultBroker, InstanceID: "i", ServiceID: serviceID, PlanID: samplebroker.PlanSyncID,
		Started: now, Deadline: now.Add(5*time.Second + time.Minute)}
	f.deadReplica(t, l, instancePath("i"), provisionBody)
}

// deadShimReplica leaves what a replica killed as its shimmed provision
// timed out leaves: the outcome it wrote (failed, the lock held), no
// orphan candidate, and the instance the broker made.
func deadShimReplica(t *testing.T, f *faultEnv) {
	t.Helper()
	now := f.clock.Now()
	l := store.Lock{Key: store.LockKey(faultBroker, "i"), Owner: "killed-replica-call", Kind: store.KindProvision, Tenant: "t",
		Broker: faultBroker, InstanceID: "i", ServiceID: serviceID, PlanID: samplebroker.PlanSyncID, Async: true,
		Operation: "osb-gateway-provision-killed", Started: now, Deadline: now.Add(5*time.Second + time.Minute),
		Shim: store.Shim{State: store.StateFailed, Description: `broker "b" did not answer within 5s`, Replica: "killed-replica",
			CallEnds: now.Add(5 * time.Second), Hold: true}}
	f.deadReplica(t, l, instancePath("i"), provisionBody)
}

// deadReplica leaves what a replica killed mid-call leaves: its lock l,
// which no gateway will settle, and what the broker made of the call
// after the kill (a PUT of body to path, sent to the broker directly).
func (f *faultEnv) deadReplica(t *testing.T, l store.Lock, path, body string) {
	t.Helper()
	if _, err := f.stores[0].Acquire(context.Background(), l); err != nil {
		t.Fatalf("the dead call's lock: %v", err)
	}
	req := httptest.NewRequest(http.MethodPut, path, strings.NewReader(body))
	req.SetBasicAuth(sampleUser, samplePass)
	req.Header.Set("X-Broker-API-Version", "2.17")
	rec := httptest.NewRecorder()
	f.broker.ServeHTTP(rec, req)
	if rec.Code != http.StatusCreated {
		t.Fatalf("the broker's PUT %s after the kill: %d %s", path, rec.Code, rec.Body)
	}
}

// rawBind is a bind whose answer the platform reads as it comes.
var rawBind = platformCall{"bind", samplebroker.EndpointBind, func(c osb.Client, id string) error {
	return rawSend(baseOf(c), http.MethodPut, instancePath(id)+"/service_bindings/k", bindBody, halfClose)
}}

// rawDeprovision is a deprovision whose answer the platform reads as it
// comes, JSON or not.
var rawDeprovision = platformCall{"deprovision", samplebroker.EndpointDeprovision, func(c osb.Client, id string) error {
	return rawSend(baseOf(c), http.MethodDelete, instancePath(id)+"?service_id="+serviceID+"&plan_id="+samplebroker.PlanSyncID, "", halfClose) // a half-close is served like any other call
}}

// resetAfterBroker makes the broker serve the next call to ep, then
// resets the connection (SO_LINGER 0) before a byte of the answer.
func resetAfterBroker(ep string) func(*testing.T, *faultEnv) {
	return func(_ *testing.T, f *faultEnv) {
		f.front.set(ep, func(w http.ResponseWriter, r *http.Request) {
			f.front.next.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				panic(err) // httptest.Server's connections can be hijacked
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			conn.Close()
		})
	}
}

// deadReplicaBinds leaves what a replica killed mid-bind leaves: its lock,
// which no gateway will settle (deadline: the broker timeout, 5s, plus a
// minute), and the binding the broker made after the kill.
func deadReplicaBinds(t *testing.T, f *faultEnv) {
	t.Helper()
	now := f.clock.Now()
	l := store.Lock{Key: store.BindingLockKey(faultBroker, "i", "k"), Owner: "killed-replica-call", Kind: store.KindBind, Tenant: "t",
		Broker: faultBroker, InstanceID: "i", BindingID: "k", ServiceID: serviceID, PlanID: samplebroker.PlanSyncID,
		Started: now, Deadline: now.Add(5*time.Second + time.Minute)}
	f.deadReplica(t, l, instancePath("i")+"/service_bindings/k", bindBody)
}

var unbindK = platformCall{"unbind", samplebroker.EndpointUnbind, func(c osb.Client, id string) error {
	_, err := c.Unbind(&osb.UnbindRequest{InstanceID: id, BindingID: "k", ServiceID: serviceID, PlanID: samplebroker.PlanSyncID})
	return err
}}

func pauseStore(t *testing.T, f *faultEnv) {
	f.redis.Pause()
	t.Cleanup(f.redis.Resume) // harmless when it runs
}

func resumeStore(_ *testing.T, f *faultEnv) { f.redis.Resume() }

var (
	provisionAsyncBody = fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":%q,"space_guid":%q}`,
		samplebroker.ServiceID, samplebroker.PlanAsyncID, orgGUID, spaceGUID)

	// hangUpFINProvisionAsync is an async provision whose platform closes
	// with a FIN before the answer: the gateway's write of the 202
	// succeeds, so the gateway counts it delivered, but nobody reads it.
	hangUpFINProvisionAsync = platformCall{"async provision, the platform hanging up with a FIN", samplebroker.EndpointProvision,
		func(c osb.Client, id string) error {
			return rawSend(baseOf(c), http.MethodPut, instancePath(id)+"?accepts_incomplete=true", provisionAsyncBody, hangUpFIN)
		}}
	deprovisionAsync = platformCall{"async deprovision", samplebroker.EndpointDeprovision, func(c osb.Client, id string) error {
		_, err := c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: serviceID, PlanID: asyncPlan})
		return err
	}}
)

// sweepOperations runs every replica's sweep once, as its ticker would
// every state.sweep_interval: expired locks, and the watch of async
// operations nobody settled.
func sweepOperations(t *testing.T, f *faultEnv) {
	t.Helper()
	for _, g := range f.gateways {
		g.SweepOperations(context.Background())
	}
}
