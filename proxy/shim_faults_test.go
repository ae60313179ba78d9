package proxy

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
)

// The async shim across the death of its gateway process and a pause of
// its state store (issue 28, items 4 and 5): the gateway never loses track
// of, nor deletes, an instance the broker made.

// TestKill9DuringShimmedProvisionLeavesNoUntrackedInstance: a gateway on a
// bolt file dies with a shimmed provision in flight at the broker. The
// gateway that opens the file next reports the operation failed, but holds
// the instance until the broker call must be over (a retry gets 400, an
// operator's early retry of the undo sends nothing), and only then sends
// the undo's DELETE, which finds the instance the broker finished making
// and deletes it: nothing is left at the broker that the gateway does not
// name.
func TestKill9DuringShimmedProvisionLeavesNoUntrackedInstance(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	state := "{backend: bolt, path: " + path + "}"
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store { return openStore(t, store.Config{Backend: store.BackendBolt, Path: path}, clock) }
	stA := open()
	a := newShimEnv(t, shimOptions{state: state, store: stA, clock: clock})
	pending := a.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	release := a.held(t).releaser(t)
	a.fire(t)
	op := operationOf(t, wait(t, pending))
	clock.Advance(1500 * time.Millisecond)
	a.g.Close(nil) // the process dies: nothing of it writes again
	stA.Close()

	b := newShimEnv(t, shimOptions{state: state, store: open(), clock: clock, broker: a.broker})
	key := store.LockKey("b", "held1")
	poll := b.call(t, "GET", "/v2/service_instances/held1/last_operation?operation="+op, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"failed","description":"`+emulate.ShimLost+`"}` {
		t.Errorf("poll after the restart: %d %s", poll.status, poll.body)
	}
	// The call started at 0 with a 30s timeout and hold_after_timeout 1m.
	holdEnds := time.Date(2026, 1, 1, 0, 1, 30, 0, time.UTC)
	if l := b.lock(t, key); !l.Shim.Hold || !l.Deadline.Equal(holdEnds) {
		t.Fatalf("lock after the poll: %+v, want held until %s", l, holdEnds)
	}
	if got := b.call(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision); got.status != 400 || !strings.Contains(got.body, InProgress) {
		t.Errorf("a retry during the hold: %d %s", got.status, got.body)
	}
	orphans, _ := b.st.ListOrphans(context.Background())
	if len(orphans) != 1 || !orphans[0].NextAttempt.Equal(holdEnds) || !orphans[0].HoldUntil.Equal(holdEnds) || orphans[0].LockOwner == "" {
		t.Fatalf("orphans %+v, want the provision's undo due when the hold ends, under the held lock", orphans)
	}

	// An operator makes the undo due at once: it waits for the hold.
	early := orphans[0]
	early.NextAttempt = clock.Now()
	if err := b.st.PutOrphan(context.Background(), early); err != nil {
		t.Fatal(err)
	}
	b.g.MitigateOrphans(context.Background())
	if n := a.broker.Count("deprovision"); n != 0 {
		t.Errorf("%d DELETEs during the hold", n)
	}

	release() // the broker finishes the provision it got before the death
	waitFor(t, func() bool { return brokerHas(t, a.broker.url, "held1") })
	clock.Advance(holdEnds.Sub(clock.Now()))
	done := make(chan struct{})
	go func() { b.g.MitigateOrphans(context.Background()); close(done) }()
	if undo := b.held(t); undo.r.Method != http.MethodDelete {
		t.Errorf("the broker got %s %s, want the undo's DELETE", undo.r.Method, undo.r.URL)
	} else {
		undo.releaser(t)()
	}
	<-done
	if n := a.broker.Count("deprovision"); n != 1 {
		t.Errorf("%d DELETEs once the hold ended, want 1", n)
	}
	if brokerHas(t, a.broker.url, "held1") {
		t.Error("the instance the broker made is still there after the undo")
	}
	if orphans, _ := b.st.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("orphans after the undo: %+v", orphans)
	}
	if l := b.lock(t, key); l.Key != "" {
		t.Errorf("lock after the undo: %+v", l)
	}
}

// TestStorePauseDuringShimmedCallKeepsTheOutcome: the Redis server stops
// answering (SIGSTOP) after the shim's 202 and before the broker's answer.
// The polls get 503 while it is paused; once it is back, the replica that
// ran the call writes the outcome and the inventory record it kept, and the
// polls report the success, also after the call's time is over: the
// replica lives, so nothing reports it lost, and nothing undoes the
// instance.
func TestStorePauseDuringShimmedCallKeepsTheOutcome(t *testing.T) {
	r := storetest.StartRedis(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := openStore(t, store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock)
	e := newShimEnv(t, shimOptions{store: st, clock: clock})
	pending := e.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	release := e.held(t).releaser(t)
	e.fire(t)
	op := operationOf(t, wait(t, pending))
	pollPath := "/v2/service_instances/held1/last_operation?operation=" + op

	r.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			r.Resume()
		}
	})
	release()
	waitLong(t, "the shim to queue the outcome the store did not take", func() bool { return e.g.guard.Retry.Len() > 0 })
	if poll := e.call(t, "GET", pollPath, "2.15", ""); poll.status != 503 {
		t.Errorf("poll while the store is paused: %d %s", poll.status, poll.body)
	}
	r.Resume()
	resumed = true

	key := store.LockKey("b", "held1")
	waitLong(t, "the outcome to reach the store", func() bool {
		e.g.guard.Retry.RetryNow()
		return e.lock(t, key).Shim.State == store.StateSucceeded
	})
	clock.Advance(30*time.Second + guard.SyncHoldMargin + emulate.ShimLostGrace) // past the call's time and any challenge
	poll := e.call(t, "GET", pollPath, "2.15", "")
	if poll.status != 200 || poll.body != `{"state":"succeeded"}` {
		t.Errorf("poll after the store is back: %d %s", poll.status, poll.body)
	}
	if in, err := st.GetInstance(context.Background(), "b", "held1"); err != nil || in.LastOperation.State != store.StateSucceeded {
		t.Errorf("inventory after the store is back: %+v, %v", in, err)
	}
	e.g.MitigateOrphans(context.Background())
	if orphans, _ := st.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("orphans: %+v", orphans)
	}
	if n := e.broker.Count("deprovision"); n != 0 || !brokerHas(t, e.broker.url, "held1") {
		t.Errorf("%d DELETEs; the instance is gone from the broker", n)
	}
}

// TestShimLostOnlyWhenItsReplicaIsGone: an operation still in progress
// after its call's time is never lost on the replica that runs it, and
// another replica reports it lost only when a challenge went unanswered
// for shimLostGrace; a replica that writes its outcome in the meantime
// answers the challenge.
func TestShimLostOnlyWhenItsReplicaIsGone(t *testing.T) {
	r := storetest.StartRedis(t)
	clock := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	open := func() store.Store {
		return openStore(t, store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, clock)
	}
	a := newShimEnv(t, shimOptions{store: open(), clock: clock})
	b := newShimEnv(t, shimOptions{store: open(), clock: clock, broker: a.broker})
	pending := a.send(t, "PUT", "/v2/service_instances/held1?accepts_incomplete=true", "2.15", shimProvision)
	held := a.held(t)
	a.fire(t)
	op := operationOf(t, wait(t, pending))
	pollPath := "/v2/service_instances/held1/last_operation?operation=" + op
	inProgress := func(e *shimEnv, what string) {
		t.Helper()
		if poll := e.call(t, "GET", pollPath, "2.15", ""); !strings.Contains(poll.body, `"state":"in progress"`) {
			t.Errorf("%s: %d %s", what, poll.status, poll.body)
		}
	}
	clock.Advance(30*time.Second + guard.SyncHoldMargin)
	inProgress(a, "the running replica's poll after the call's time")
	inProgress(b, "the other replica's first poll after the call's time (a challenge)")
	key := store.LockKey("b", "held1")
	if l := a.lock(t, key); !l.Shim.Challenged.Equal(clock.Now()) {
		t.Errorf("lock after the challenge: %+v", l)
	}
	clock.Advance(emulate.ShimLostGrace - time.Second)
	inProgress(b, "a poll within the challenge")
	held.releaser(t)() // the running replica's outcome comes
	a.waitShim(t, key, store.StateSucceeded)
	clock.Advance(time.Second)
	if poll := b.call(t, "GET", pollPath, "2.15", ""); poll.body != `{"state":"succeeded"}` {
		t.Errorf("the other replica's poll after the outcome: %d %s", poll.status, poll.body)
	}
}

// brokerHas reports whether the sample broker at url holds instance id.
func brokerHas(t *testing.T, url, id string) bool {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url+"/v2/service_instances/"+id, nil)
	req.SetBasicAuth("sample", "sample-secret")
	req.Header.Set("X-Broker-API-Version", "2.17")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// waitLong waits until cond holds, failing after 30s: long enough for a
// store client's timeouts against a paused server and the retry queue's
// backoff, on a loaded machine.
func waitLong(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
