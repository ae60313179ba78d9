package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The rest of the contract: listing, expiry sweeps, the orphan queue,
// contexts, concurrency, restart and Close.

func testList(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	var all []Lock
	for _, p := range []struct{ broker, tenant, id string }{
		{"a", "x", "1"}, {"a", "y", "2"}, {"b", "x", "3"}, {"b", "y", "4"}, {"a", "x", "5"},
	} {
		l := testLock(p.id, "owner-"+p.id, time.Hour)
		l.Key, l.Broker, l.Tenant = LockKey(p.broker, p.id), p.broker, p.tenant
		all = append(all, mustAcquire(t, s, l))
	}
	gone := testLock("6", "owner-6", time.Hour)
	gone.Broker, gone.Tenant = "a", "x"
	mustAcquire(t, s, gone)
	if _, err := s.ForceRelease(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	a1, a2, b3, b4, a5 := all[0], all[1], all[2], all[3], all[4]

	tests := []struct {
		name string
		f    ListFilter
		want []Lock
	}{
		{"all, by key", ListFilter{}, []Lock{a1, a2, a5, b3, b4}},
		{"broker", ListFilter{Broker: "a"}, []Lock{a1, a2, a5}},
		{"tenant", ListFilter{Tenant: "y"}, []Lock{a2, b4}},
		{"broker and tenant", ListFilter{Broker: "b", Tenant: "x"}, []Lock{b3}},
		{"unknown broker", ListFilter{Broker: "c"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.List(ctx, tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmpEmpty); d != "" {
				t.Errorf("List(%+v) (-want +got):\n%s", tc.f, d)
			}
		})
	}
}

// testListExpired: List with Expired also returns the locks past their
// deadline that no sweep has removed, and only until one does; without
// it, List never does.
func testListExpired(t *testing.T, b backend) {
	ctx := context.Background()
	clock := osbtest.NewClock(t0)
	s := b.open(t, clock.Now)
	early := mustAcquire(t, s, testLock("1", "o1", time.Minute))
	late := mustAcquire(t, s, testLock("2", "o2", time.Hour))
	clock.Advance(2 * time.Minute)
	for _, tc := range []struct {
		name string
		f    ListFilter
		want []Lock
	}{
		{"live only", ListFilter{Tenant: "cf1"}, []Lock{late}},
		{"with expired", ListFilter{Tenant: "cf1", Expired: true}, []Lock{early, late}},
		{"with expired, one instance", ListFilter{Broker: "b1", InstanceID: "1", Expired: true}, []Lock{early}},
	} {
		got, err := s.List(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, got, cmpEmpty); d != "" {
			t.Errorf("%s: List(%+v) (-want +got):\n%s", tc.name, tc.f, d)
		}
	}
	if _, err := s.ExpireDue(ctx, clock.Now()); err != nil {
		t.Fatal(err)
	}
	got, err := s.List(ctx, ListFilter{Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Lock{late}, got, cmpEmpty); d != "" {
		t.Errorf("List with Expired after the sweep (-want +got):\n%s", d)
	}
}

// cmpEmpty makes a nil slice equal to an empty one.
var cmpEmpty = cmpopts.EquateEmpty()

func testExpireDue(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	l3 := mustAcquire(t, s, testLock("3", "o", 3*time.Minute))
	l2b := mustAcquire(t, s, testLock("2b", "o", 2*time.Minute))
	l1 := mustAcquire(t, s, testLock("1", "o", time.Minute))
	l2a := mustAcquire(t, s, testLock("2a", "o", 2*time.Minute))

	got, err := s.ExpireDue(ctx, t0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Lock{l1, l2a, l2b}, got); d != "" {
		t.Errorf("ExpireDue (-want +got):\n%s", d)
	}
	left, err := s.List(ctx, ListFilter{})
	if err != nil || !cmp.Equal([]Lock{l3}, left) {
		t.Errorf("List after ExpireDue = %v, %v; want only %s", left, err, l3.Key)
	}
	if got, err := s.ExpireDue(ctx, t0.Add(2*time.Minute)); err != nil || len(got) != 0 {
		t.Errorf("second ExpireDue = %v, %v; want none", got, err)
	}
	mustAcquire(t, s, testLock("1", "o2", time.Hour)) // deleted, so free
}

func testOrphan(id string, next time.Time) Orphan {
	return Orphan{
		ID: id, Broker: "b1", Tenant: "cf1", Kind: KindDeprovision, InstanceID: "i-" + id,
		ServiceID: "svc", PlanID: "plan", Reason: "provision timed out", NextAttempt: next, Created: t0,
		LockOwner: "lock-owner-" + id, HoldUntil: t0.Add(90 * time.Second),
	}
}

func testOrphans(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	o2, o1 := testOrphan("o2", t0.Add(time.Minute)), testOrphan("o1", time.Time{})
	o1.Created, o1.Kind, o1.BindingID = time.Time{}, KindUnbind, "bnd"
	for _, o := range []Orphan{o2, o1} {
		if err := s.PutOrphan(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	o1.Created, o1.NextAttempt = t0, t0 // zero means the store's now
	if got, err := s.GetOrphan(ctx, "o1"); err != nil || !cmp.Equal(o1, got) {
		t.Errorf("GetOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(o1, got))
	}

	o2.Attempts, o2.LastError, o2.NextAttempt = 1, "broker answered 500", t0.Add(time.Hour)
	if err := s.PutOrphan(ctx, o2); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListOrphans(ctx)
	if d := cmp.Diff([]Orphan{o1, o2}, got); err != nil || d != "" {
		t.Errorf("ListOrphans = %v; diff (-want +got):\n%s", err, d)
	}

	wantErr(t, "DeleteOrphan", s.DeleteOrphan(ctx, "o1"), nil)
	wantErr(t, "second DeleteOrphan", s.DeleteOrphan(ctx, "o1"), ErrNotFound)
	_, err = s.GetOrphan(ctx, "o1")
	wantErr(t, "GetOrphan after delete", err, ErrNotFound)
	got, err = s.ListOrphans(ctx)
	if d := cmp.Diff([]Orphan{o2}, got); err != nil || d != "" {
		t.Errorf("ListOrphans after delete = %v; diff (-want +got):\n%s", err, d)
	}
}

func testDueOrphans(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	put := func(o Orphan) Orphan {
		t.Helper()
		if err := s.PutOrphan(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	c := put(testOrphan("c", t0.Add(time.Minute)))
	a := put(testOrphan("a", t0.Add(2*time.Minute)))
	bb := put(testOrphan("b", t0.Add(time.Minute))) // ties with c: by ID
	d := put(testOrphan("d", t0.Add(-time.Hour)))
	put(testOrphan("e", t0.Add(3*time.Minute)))
	moved := put(testOrphan("f", t0))
	moved.NextAttempt = t0.Add(time.Hour) // replaced: no longer due
	put(moved)

	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []Orphan
	}{
		{"by time then id", t0.Add(2 * time.Minute), 0, []Orphan{d, bb, c, a}},
		{"limit", t0.Add(2 * time.Minute), 2, []Orphan{d, bb}},
		{"negative limit is all", t0.Add(time.Minute), -1, []Orphan{d, bb, c}},
		{"none due", t0.Add(-2 * time.Hour), 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.DueOrphans(ctx, tc.now, tc.limit)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got, cmpEmpty); d != "" {
				t.Errorf("DueOrphans (-want +got):\n%s", d)
			}
		})
	}
}

// calls exercises every method of s with ctx and returns their errors.
func calls(ctx context.Context, s Store) map[string]error {
	l := testLock("i1", "owner-1", time.Hour)
	errs := map[string]error{}
	_, errs["Acquire"] = s.Acquire(ctx, l)
	errs["Update"] = s.Update(ctx, l)
	errs["Release"] = s.Release(ctx, l.Key, l.Owner)
	_, errs["ForceRelease"] = s.ForceRelease(ctx, l.Key)
	_, errs["Get"] = s.Get(ctx, l.Key)
	_, errs["List"] = s.List(ctx, ListFilter{})
	_, errs["ExpireDue"] = s.ExpireDue(ctx, t0)
	errs["PutOrphan"] = s.PutOrphan(ctx, testOrphan("o1", t0))
	_, errs["GetOrphan"] = s.GetOrphan(ctx, "o1")
	_, errs["ListOrphans"] = s.ListOrphans(ctx)
	errs["DeleteOrphan"] = s.DeleteOrphan(ctx, "o1")
	_, errs["DueOrphans"] = s.DueOrphans(ctx, t0, 0)
	_, errs["ClaimOrphan"] = s.ClaimOrphan(ctx, "o1", "replica-a", t0.Add(time.Hour))
	errs["Ping"] = s.Ping(ctx)
	in, bd := testInstance("b1", "i1", "cf1"), testBinding("b1", "i1", "x1")
	_, errs["PutInstance"] = s.PutInstance(ctx, in)
	_, errs["GetInstance"] = s.GetInstance(ctx, "b1", "i1")
	_, _, errs["ListInstances"] = s.ListInstances(ctx, InstanceFilter{Tenant: "cf1"}, "", 10)
	_, errs["CountInstances"] = s.CountInstances(ctx, InstanceFilter{})
	_, errs["PutBinding"] = s.PutBinding(ctx, bd)
	_, errs["GetBinding"] = s.GetBinding(ctx, "b1", "i1", "x1")
	_, errs["ListBindings"] = s.ListBindings(ctx, "b1", "i1")
	_, errs["CountBindings"] = s.CountBindings(ctx, "")
	_, errs["ExpiringBindings"] = s.ExpiringBindings(ctx, "", t0, 0)
	_, errs["CountExpiring"] = s.CountExpiring(ctx, t0)
	errs["DeleteBinding"] = s.DeleteBinding(ctx, "b1", "i1", "x1")
	_, errs["DeleteInstance"] = s.DeleteInstance(ctx, "b1", "i1")
	_, errs["Import"] = s.Import(ctx, []Entry{{Instance: &in}, {Binding: &bd}}, true)
	for _, err := range s.Export(ctx) {
		errs["Export"] = err
	}
	return errs
}

func testCancelledContext(t *testing.T, b backend) {
	s := b.open(t, osbtest.NewClock(t0).Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	for name, err := range calls(ctx, s) {
		wantErr(t, name+" with a cancelled context", err, context.Canceled)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("calls with a cancelled context took %s", took)
	}
	ctx = context.Background()
	if _, err := s.Get(ctx, LockKey("b1", "i1")); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after a cancelled Acquire: %v, want ErrNotFound", err)
	}
	if got, err := s.ListOrphans(ctx); err != nil || len(got) != 0 {
		t.Errorf("ListOrphans after a cancelled PutOrphan = %v, %v; want none", got, err)
	}
}

func testRaceOneWinner(t *testing.T, b backend) {
	const racers = 100
	s := b.open(t, osbtest.NewClock(t0).Now)
	start := make(chan struct{})
	var wg sync.WaitGroup
	holders := make([]Lock, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			holders[i], errs[i] = s.Acquire(context.Background(), testLock("i1", fmt.Sprint("owner-", i), time.Hour))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("owner-%d and owner-%d both acquired the lock", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, ErrHeld):
			t.Errorf("owner-%d: %v, want nil or ErrHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody acquired the lock")
	}
	want := fmt.Sprint("owner-", winner)
	for i, h := range holders {
		if h.Owner != want {
			t.Errorf("owner-%d sees holder %q, want %q", i, h.Owner, want)
		}
	}
}

func testRestart(t *testing.T, b backend) {
	if b.reopen == nil {
		t.Skip("nothing persists")
	}
	ctx := context.Background()
	c := osbtest.NewClock(t0)
	s := b.open(t, c.Now)
	l1 := mustAcquire(t, s, testLock("i1", "owner-1", time.Minute))
	l1.Async, l1.Operation, l1.Deadline = true, "task-42", t0.Add(time.Hour)
	if err := s.Update(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2 := mustAcquire(t, s, testLock("i2", "owner-2", 2*time.Hour))
	o := testOrphan("o1", t0)
	o.ClaimedBy, o.ClaimedUntil = "replica-a", t0.Add(-time.Minute) // lapsed: still due
	if err := s.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}

	s = b.reopen(t, s, c.Now)
	got, err := s.List(ctx, ListFilter{})
	if d := cmp.Diff([]Lock{l1, l2}, got); err != nil || d != "" {
		t.Errorf("List after restart = %v; diff (-want +got):\n%s", err, d)
	}
	_, err = s.Acquire(ctx, testLock("i1", "owner-3", time.Hour))
	wantErr(t, "Acquire after restart", err, ErrHeld)
	due, err := s.DueOrphans(ctx, t0, 0)
	if d := cmp.Diff([]Orphan{o}, due); err != nil || d != "" {
		t.Errorf("DueOrphans after restart = %v; diff (-want +got):\n%s", err, d)
	}
	wantErr(t, "Release after restart", s.Release(ctx, l1.Key, l1.Owner), nil)
	expired, err := s.ExpireDue(ctx, t0.Add(2*time.Hour))
	if d := cmp.Diff([]Lock{l2}, expired); err != nil || d != "" {
		t.Errorf("ExpireDue after restart = %v; diff (-want +got):\n%s", err, d)
	}
}

func testClosed(t *testing.T, b backend) {
	s := b.open(t, osbtest.NewClock(t0).Now)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, err := range calls(context.Background(), s) {
		wantErr(t, name+" after Close", err, ErrUnavailable)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
