package proxy

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// liveAtEnd is the usage report's live instances at now, over every plan.
func (e *reconcileEnv) liveAtEnd(t *testing.T) int {
	t.Helper()
	rep, err := e.g.Usage(context.Background(), UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range rep.Rows {
		n += r.LiveAtEnd
	}
	return n
}

// After Release, the inventory said "provision in progress" and usage
// counted the instance as live: the record now says the outcome is
// unknown (who released it, why), usage leaves it out, and a reconcile of
// the instance polls the broker and settles the record, which usage then
// counts.
func TestReleaseLeavesTheOutcomeUnknownUntilAReconcile(t *testing.T) {
	e := newReconcileEnv(t)
	ctx := context.Background()
	e.provisionAsync(t, "i1")
	e.clock.Advance(time.Minute) // the broker finishes at 2 minutes
	if n := e.liveAtEnd(t); n != 1 {
		t.Fatalf("before the release usage counts %d live instances, want the provision in progress", n)
	}
	if err := e.g.ReleaseOperation(ctx, "b", "i1", "", "carol", "stuck since the outage"); err != nil {
		t.Fatal(err)
	}
	last, ok := e.lastOperation(t, "")
	if !ok || last.Kind != store.KindProvision || last.State != store.StateUnknown || last.Operation == "" ||
		!strings.Contains(last.Description, "released by carol (stuck since the outage)") {
		t.Fatalf("after the release the record says %+v (%t), want the provision's outcome unknown, naming carol", last, ok)
	}
	if n := e.liveAtEnd(t); n != 0 {
		t.Errorf("after the release usage counts %d live instances, want the provision of unknown outcome left out", n)
	}

	// The broker still works on it: the reconcile says so, the record
	// stays unknown.
	res, err := e.g.Reconcile(ctx, ReconcileRequest{Broker: "b", InstanceID: "i1", Who: "dave"})
	if err != nil || res.Outcome != OutcomeInProgress {
		t.Fatalf("reconcile of the released provision while the broker works: %+v, %v", res, err)
	}
	if last, _ := e.lastOperation(t, ""); last.State != store.StateUnknown {
		t.Errorf("after an in-progress answer the record says %s, want unknown", last.State)
	}
	e.clock.Advance(2 * time.Minute)
	res, err = e.g.Reconcile(ctx, ReconcileRequest{Broker: "b", InstanceID: "i1", Who: "dave"})
	if err != nil || res.Outcome != OutcomeSettledSucceeded {
		t.Fatalf("reconcile of the released provision once done: %+v, %v", res, err)
	}
	if last, _ := e.lastOperation(t, ""); last.State != store.StateSucceeded {
		t.Errorf("after the reconcile the record says %s, want succeeded", last.State)
	}
	if _, err := e.st.Get(ctx, store.LockKey("b", "i1")); err == nil {
		t.Error("the reconcile left its lock behind")
	}
	if n := e.liveAtEnd(t); n != 1 {
		t.Errorf("after the reconcile usage counts %d live instances, want the provision that succeeded", n)
	}
	if n := e.broker.Count(samplebroker.EndpointInstanceLastOperation); n != 2 {
		t.Errorf("the broker got %d polls, want the two reconciles'", n)
	}
	var actions []string
	for _, r := range e.recs.own() {
		actions = append(actions, r.Action+" "+r.Outcome)
	}
	if got := strings.Join(actions, ", "); got != "release released, reconcile still in progress, reconcile settled succeeded" {
		t.Errorf("audit: %s", got)
	}
}

// A release of a lock whose outcome an operator forced records that
// outcome, not unknown: what the operator said.
func TestReleaseAfterAForcedStateRecordsIt(t *testing.T) {
	e := newReconcileEnv(t)
	ctx := context.Background()
	e.provisionAsync(t, "i1")
	if _, err := e.g.Reconcile(ctx, ReconcileRequest{Broker: "b", InstanceID: "i1", State: store.StateFailed, Description: "given up", Who: "carol"}); err != nil {
		t.Fatal(err)
	}
	if err := e.g.ReleaseOperation(ctx, "b", "i1", "", "carol", "no platform polls it"); err != nil {
		t.Fatal(err)
	}
	if last, _ := e.lastOperation(t, ""); last.State != store.StateFailed || last.Description != "given up" {
		t.Errorf("after the release the record says %+v, want the forced failure", last)
	}
	if n := e.liveAtEnd(t); n != 0 {
		t.Errorf("usage counts %d live instances, want the failed provision left out", n)
	}
}

// racingRelease is a state store in which a platform's call takes a lock
// the moment an operator's release frees it.
type racingRelease struct {
	store.Store
	took store.Lock
}

func (r *racingRelease) ForceRelease(ctx context.Context, key string) (store.Lock, error) {
	l, err := r.Store.ForceRelease(ctx, key)
	if err == nil {
		r.took = l
		r.took.Owner, r.took.Kind, r.took.Operation = "platform", store.KindUpdate, ""
		if _, err := r.Store.Acquire(ctx, r.took); err != nil {
			panic(err)
		}
	}
	return l, err
}

// A platform's call that takes the instance's lock right after a release
// owns the instance's record: the release's mark ("outcome unknown") is
// left out, never written over the call's operation.
func TestReleaseRacedByAPlatformCallLeavesItsRecord(t *testing.T) {
	e := newReconcileEnv(t)
	ctx := context.Background()
	e.provisionAsync(t, "i1")
	before, ok := e.lastOperation(t, "")
	if !ok || before.State != store.StateInProgress {
		t.Fatalf("before the release the record says %+v (%t), want the provision in progress", before, ok)
	}
	race := &racingRelease{Store: e.g.guard.St}
	e.g.guard.St = race
	if err := e.g.ReleaseOperation(ctx, "b", "i1", "", "carol", "stuck since the outage"); err != nil {
		t.Fatal(err)
	}
	if last, _ := e.lastOperation(t, ""); last.State == store.StateUnknown {
		t.Errorf("the release marked the record %+v while a platform's call held the instance", last)
	}
	l, err := e.st.Get(ctx, store.LockKey("b", "i1"))
	if err != nil || l.Owner != "platform" {
		t.Errorf("the platform's lock: %+v, %v; want it held", l, err)
	}
}

// The operations and orphan tables named no organization or space: what
// the inventory records of an instance's context names it, and an
// instance it does not hold names nothing.
func TestViewPlacesOf(t *testing.T) {
	e := newReconcileEnv(t)
	ctx := context.Background()
	in := store.Instance{Broker: "b", InstanceID: "i1", Tenant: "t1", ServiceID: "s", PlanID: "p",
		Context: []byte(`{"platform":"cloudfoundry","organization_name":"acme","space_name":"prod"}`)}
	if _, err := e.st.PutInstance(ctx, in); err != nil {
		t.Fatal(err)
	}
	got := NewView(NewSwitch(e.g)).PlacesOf(ctx, [][2]string{{"b", "i1"}, {"b", "nope"}, {"b", "i1"}})
	if p := got[[2]string{"b", "i1"}]; p.Organization != "acme" || p.Space != "prod" {
		t.Errorf("i1: %+v, want acme / prod", p)
	}
	if p, ok := got[[2]string{"b", "nope"}]; !ok || p != (PlatformNames{}) {
		t.Errorf("an instance the inventory does not hold: %+v (%t), want no names", p, ok)
	}
}
