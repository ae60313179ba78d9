package storetest

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
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The rest of the contract: listing, expiry sweeps, the orphan queue,
// contexts, concurrency, restart and Close.

func testList(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	var all []store.Lock
	for _, p := range []struct{ broker, tenant, id string }{
		{"a", "x", "1"}, {"a", "y", "2"}, {"b", "x", "3"}, {"b", "y", "4"}, {"a", "x", "5"},
	} {
		l := Lock(p.id, "owner-"+p.id, time.Hour)
		l.Key, l.Broker, l.Tenant = store.LockKey(p.broker, p.id), p.broker, p.tenant
		all = append(all, MustAcquire(t, s, l))
	}
	gone := Lock("6", "owner-6", time.Hour)
	gone.Broker, gone.Tenant = "a", "x"
	MustAcquire(t, s, gone)
	if _, err := s.ForceRelease(ctx, gone.Key); err != nil {
		t.Fatal(err)
	}
	a1, a2, b3, b4, a5 := all[0], all[1], all[2], all[3], all[4]

	tests := []struct {
		name string
		f    store.ListFilter
		want []store.Lock
	}{
		{"all, by key", store.ListFilter{}, []store.Lock{a1, a2, a5, b3, b4}},
		{"broker", store.ListFilter{Broker: "a"}, []store.Lock{a1, a2, a5}},
		{"tenant", store.ListFilter{Tenant: "y"}, []store.Lock{a2, b4}},
		{"broker and tenant", store.ListFilter{Broker: "b", Tenant: "x"}, []store.Lock{b3}},
		{"unknown broker", store.ListFilter{Broker: "c"}, nil},
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
func testListExpired(t *testing.T, b Backend) {
	ctx := context.Background()
	clock := osbtest.NewClock(T0)
	s := b.Open(t, clock.Now)
	early := MustAcquire(t, s, Lock("1", "o1", time.Minute))
	late := MustAcquire(t, s, Lock("2", "o2", time.Hour))
	clock.Advance(2 * time.Minute)
	for _, tc := range []struct {
		name string
		f    store.ListFilter
		want []store.Lock
	}{
		{"live only", store.ListFilter{Tenant: "cf1"}, []store.Lock{late}},
		{"with expired", store.ListFilter{Tenant: "cf1", Expired: true}, []store.Lock{early, late}},
		{"with expired, one instance", store.ListFilter{Broker: "b1", InstanceID: "1", Expired: true}, []store.Lock{early}},
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
	got, err := s.List(ctx, store.ListFilter{Expired: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]store.Lock{late}, got, cmpEmpty); d != "" {
		t.Errorf("List with Expired after the sweep (-want +got):\n%s", d)
	}
}

// cmpEmpty makes a nil slice equal to an empty one.
var cmpEmpty = cmpopts.EquateEmpty()

func testExpireDue(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l3 := MustAcquire(t, s, Lock("3", "o", 3*time.Minute))
	l2b := MustAcquire(t, s, Lock("2b", "o", 2*time.Minute))
	l1 := MustAcquire(t, s, Lock("1", "o", time.Minute))
	l2a := MustAcquire(t, s, Lock("2a", "o", 2*time.Minute))

	got, err := s.ExpireDue(ctx, T0.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]store.Lock{l1, l2a, l2b}, got); d != "" {
		t.Errorf("ExpireDue (-want +got):\n%s", d)
	}
	left, err := s.List(ctx, store.ListFilter{})
	if err != nil || !cmp.Equal([]store.Lock{l3}, left) {
		t.Errorf("List after ExpireDue = %v, %v; want only %s", left, err, l3.Key)
	}
	if got, err := s.ExpireDue(ctx, T0.Add(2*time.Minute)); err != nil || len(got) != 0 {
		t.Errorf("second ExpireDue = %v, %v; want none", got, err)
	}
	MustAcquire(t, s, Lock("1", "o2", time.Hour)) // deleted, so free
}

// Orphan is an orphan deprovision of instance "i-"+id of broker "b1" for
// tenant "cf1", created at T0 and due at next.
func Orphan(id string, next time.Time) store.Orphan {
	return store.Orphan{
		ID: id, Broker: "b1", Tenant: "cf1", Kind: store.KindDeprovision, InstanceID: "i-" + id,
		ServiceID: "svc", PlanID: "plan", Reason: "provision timed out", NextAttempt: next, Created: T0,
		LockOwner: "lock-owner-" + id, HoldUntil: T0.Add(90 * time.Second),
	}
}

func testOrphans(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	o2, o1 := Orphan("o2", T0.Add(time.Minute)), Orphan("o1", time.Time{})
	o1.Created, o1.Kind, o1.BindingID = time.Time{}, store.KindUnbind, "bnd"
	for _, o := range []store.Orphan{o2, o1} {
		if err := s.PutOrphan(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	o1.Created, o1.NextAttempt = T0, T0 // zero means the store's now
	if got, err := s.GetOrphan(ctx, "o1"); err != nil || !cmp.Equal(o1, got) {
		t.Errorf("GetOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(o1, got))
	}

	o2.Attempts, o2.LastError, o2.NextAttempt = 1, "broker answered 500", T0.Add(time.Hour)
	if err := s.PutOrphan(ctx, o2); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListOrphans(ctx)
	if d := cmp.Diff([]store.Orphan{o1, o2}, got); err != nil || d != "" {
		t.Errorf("ListOrphans = %v; diff (-want +got):\n%s", err, d)
	}

	WantErr(t, "DeleteOrphan", s.DeleteOrphan(ctx, "o1"), nil)
	WantErr(t, "second DeleteOrphan", s.DeleteOrphan(ctx, "o1"), store.ErrNotFound)
	_, err = s.GetOrphan(ctx, "o1")
	WantErr(t, "GetOrphan after delete", err, store.ErrNotFound)
	got, err = s.ListOrphans(ctx)
	if d := cmp.Diff([]store.Orphan{o2}, got); err != nil || d != "" {
		t.Errorf("ListOrphans after delete = %v; diff (-want +got):\n%s", err, d)
	}
}

func testDueOrphans(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	put := func(o store.Orphan) store.Orphan {
		t.Helper()
		if err := s.PutOrphan(ctx, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	c := put(Orphan("c", T0.Add(time.Minute)))
	a := put(Orphan("a", T0.Add(2*time.Minute)))
	bb := put(Orphan("b", T0.Add(time.Minute))) // ties with c: by ID
	d := put(Orphan("d", T0.Add(-time.Hour)))
	put(Orphan("e", T0.Add(3*time.Minute)))
	moved := put(Orphan("f", T0))
	moved.NextAttempt = T0.Add(time.Hour) // replaced: no longer due
	put(moved)

	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []store.Orphan
	}{
		{"by time then id", T0.Add(2 * time.Minute), 0, []store.Orphan{d, bb, c, a}},
		{"limit", T0.Add(2 * time.Minute), 2, []store.Orphan{d, bb}},
		{"negative limit is all", T0.Add(time.Minute), -1, []store.Orphan{d, bb, c}},
		{"none due", T0.Add(-2 * time.Hour), 0, nil},
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

// Calls exercises every method of s with ctx and returns their errors.
func Calls(ctx context.Context, s store.Store) map[string]error {
	l := Lock("i1", "owner-1", time.Hour)
	errs := map[string]error{}
	_, errs["Acquire"] = s.Acquire(ctx, l)
	_, _, errs["AcquireReading"] = s.AcquireReading(ctx, l)
	errs["Update"] = s.Update(ctx, l)
	errs["Release"] = s.Release(ctx, l.Key, l.Owner)
	_, errs["ForceRelease"] = s.ForceRelease(ctx, l.Key)
	_, errs["Get"] = s.Get(ctx, l.Key)
	_, errs["List"] = s.List(ctx, store.ListFilter{})
	_, errs["ExpireDue"] = s.ExpireDue(ctx, T0)
	errs["PutOrphan"] = s.PutOrphan(ctx, Orphan("o1", T0))
	_, errs["GetOrphan"] = s.GetOrphan(ctx, "o1")
	_, errs["ListOrphans"] = s.ListOrphans(ctx)
	errs["DeleteOrphan"] = s.DeleteOrphan(ctx, "o1")
	_, errs["DueOrphans"] = s.DueOrphans(ctx, T0, 0)
	_, errs["ClaimOrphan"] = s.ClaimOrphan(ctx, "o1", "replica-a", T0.Add(time.Hour))
	errs["Ping"] = s.Ping(ctx)
	in, bd := Instance("b1", "i1", "cf1"), Binding("b1", "i1", "x1")
	_, errs["PutInstance"] = s.PutInstance(ctx, in)
	_, _, errs["PutInstanceCancelling"] = s.PutInstanceCancelling(ctx, in, "o1")
	_, errs["GetInstance"] = s.GetInstance(ctx, "b1", "i1")
	_, _, errs["ListInstances"] = s.ListInstances(ctx, store.InstanceFilter{Tenant: "cf1"}, "", 10)
	_, errs["CountInstances"] = s.CountInstances(ctx, store.InstanceFilter{})
	_, errs["PutBinding"] = s.PutBinding(ctx, bd)
	_, errs["GetBinding"] = s.GetBinding(ctx, "b1", "i1", "x1")
	_, errs["ListBindings"] = s.ListBindings(ctx, "b1", "i1")
	_, errs["CountBindings"] = s.CountBindings(ctx, "")
	_, errs["ExpiringBindings"] = s.ExpiringBindings(ctx, "", T0, 0)
	_, errs["CountExpiring"] = s.CountExpiring(ctx, T0)
	errs["DeleteBinding"] = s.DeleteBinding(ctx, "b1", "i1", "x1")
	_, errs["DeleteInstance"] = s.DeleteInstance(ctx, "b1", "i1")
	_, errs["Import"] = s.Import(ctx, []store.Entry{{Instance: &in}, {Binding: &bd}}, true)
	for _, err := range s.Export(ctx) {
		errs["Export"] = err
	}
	errs["PutSession"] = s.PutSession(ctx, store.SessionKeyOf("id"), Session("alice", T0.Add(time.Hour)))
	_, errs["GetSession"] = s.GetSession(ctx, store.SessionKeyOf("id"))
	errs["DeleteSession"] = s.DeleteSession(ctx, store.SessionKeyOf("id"))
	return errs
}

func testCancelledContext(t *testing.T, b Backend) {
	s := b.Open(t, osbtest.NewClock(T0).Now)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	for name, err := range Calls(ctx, s) {
		WantErr(t, name+" with a cancelled context", err, context.Canceled)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("calls with a cancelled context took %s", took)
	}
	ctx = context.Background()
	if _, err := s.Get(ctx, store.LockKey("b1", "i1")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after a cancelled Acquire: %v, want ErrNotFound", err)
	}
	if got, err := s.ListOrphans(ctx); err != nil || len(got) != 0 {
		t.Errorf("ListOrphans after a cancelled PutOrphan = %v, %v; want none", got, err)
	}
}

func testRaceOneWinner(t *testing.T, b Backend) {
	const racers = 100
	s := b.Open(t, osbtest.NewClock(T0).Now)
	start := make(chan struct{})
	var wg sync.WaitGroup
	holders := make([]store.Lock, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			holders[i], errs[i] = s.Acquire(context.Background(), Lock("i1", fmt.Sprint("owner-", i), time.Hour))
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
		case !errors.Is(err, store.ErrHeld):
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

func testRestart(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("nothing persists")
	}
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	l1 := MustAcquire(t, s, Lock("i1", "owner-1", time.Minute))
	l1.Async, l1.Operation, l1.Deadline = true, "task-42", T0.Add(time.Hour)
	if err := s.Update(ctx, l1); err != nil {
		t.Fatal(err)
	}
	l2 := MustAcquire(t, s, Lock("i2", "owner-2", 2*time.Hour))
	o := Orphan("o1", T0)
	o.ClaimedBy, o.ClaimedUntil = "replica-a", T0.Add(-time.Minute) // lapsed: still due
	if err := s.PutOrphan(ctx, o); err != nil {
		t.Fatal(err)
	}

	s = b.Reopen(t, s, c.Now)
	got, err := s.List(ctx, store.ListFilter{})
	if d := cmp.Diff([]store.Lock{l1, l2}, got); err != nil || d != "" {
		t.Errorf("List after restart = %v; diff (-want +got):\n%s", err, d)
	}
	_, err = s.Acquire(ctx, Lock("i1", "owner-3", time.Hour))
	WantErr(t, "Acquire after restart", err, store.ErrHeld)
	due, err := s.DueOrphans(ctx, T0, 0)
	if d := cmp.Diff([]store.Orphan{o}, due); err != nil || d != "" {
		t.Errorf("DueOrphans after restart = %v; diff (-want +got):\n%s", err, d)
	}
	WantErr(t, "Release after restart", s.Release(ctx, l1.Key, l1.Owner), nil)
	expired, err := s.ExpireDue(ctx, T0.Add(2*time.Hour))
	if d := cmp.Diff([]store.Lock{l2}, expired); err != nil || d != "" {
		t.Errorf("ExpireDue after restart = %v; diff (-want +got):\n%s", err, d)
	}
}

func testClosed(t *testing.T, b Backend) {
	s := b.Open(t, osbtest.NewClock(T0).Now)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for name, err := range Calls(context.Background(), s) {
		WantErr(t, name+" after Close", err, store.ErrUnavailable)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
