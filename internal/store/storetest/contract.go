package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Backend opens Stores of one kind for the contract tests.
type Backend struct {
	// Open returns a Store on new, empty storage, closed when t ends.
	Open func(t *testing.T, now func() time.Time) store.Store
	// Reopen closes s and opens a Store on the same storage, as a
	// restarted process would; nil where nothing persists.
	Reopen func(t *testing.T, s store.Store, now func() time.Time) store.Store
}

// Contract runs the Store contract against b. Every backend must pass
// it unchanged.
func Contract(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(t *testing.T, b Backend)
	}{
		{"AcquireHeldRelease", testAcquireHeldRelease},
		{"AcquireBySameOwner", testAcquireBySameOwner},
		{"Invalid", testInvalid},
		{"FarDeadline", testFarDeadline},
		{"Update", testUpdate},
		{"Expiry", testExpiry},
		{"ForceRelease", testForceRelease},
		{"List", testList},
		{"ListExpired", testListExpired},
		{"ListInstance", testListInstance},
		{"ExpireDue", testExpireDue},
		{"Orphans", testOrphans},
		{"DueOrphans", testDueOrphans},
		{"ClaimOrphan", testClaimOrphan},
		{"ClaimInvalid", testClaimInvalid},
		{"ClaimKeepsFields", testClaimKeepsFields},
		{"DueOrphansClaimed", testDueOrphansClaimed},
		{"ClaimRaceOneWinner", testClaimRaceOneWinner},
		{"CancelledContext", testCancelledContext},
		{"RaceOneWinner", testRaceOneWinner},
		{"Restart", testRestart},
		{"Closed", testClosed},
		{"Shim", testShim},
	}
	for _, tc := range slices.Concat(tests, testInventoryContract, testCatalogContract, testSessionContract) {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

// T0 is the start of every fake clock: a whole second, far from now, so
// backends that used real time would fail the expiry tests.
var T0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// Lock is a lock on instance id of broker "b1" for tenant "cf1", held
// by owner until T0 plus ttl.
func Lock(id, owner string, ttl time.Duration) store.Lock {
	return store.Lock{
		Key: store.LockKey("b1", id), Owner: owner, Kind: store.KindProvision,
		Tenant: "cf1", Broker: "b1", InstanceID: id, ServiceID: "svc", PlanID: "plan",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Started:     T0, Deadline: T0.Add(ttl),
	}
}

// MustAcquire acquires l on s and returns it as acquired, or fails t.
func MustAcquire(t *testing.T, s store.Store, l store.Lock) store.Lock {
	t.Helper()
	got, err := s.Acquire(context.Background(), l)
	if err != nil {
		t.Fatalf("Acquire(%s, %s): %v", l.Key, l.Owner, err)
	}
	return got
}

// WantErr fails t unless errors.Is(err, want) (want nil: err nil).
func WantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

func testAcquireHeldRelease(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l := Lock("i1", "owner-1", time.Hour)
	l.Started = time.Time{} // filled in with the store's now
	got := MustAcquire(t, s, l)
	want := l
	want.Started = T0
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Acquire returned (-want +got):\n%s", d)
	}
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(want, got) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, want)
	}

	other := Lock("i1", "owner-2", 2*time.Hour)
	holder, err := s.Acquire(ctx, other)
	WantErr(t, "Acquire by another owner", err, store.ErrHeld)
	if d := cmp.Diff(want, holder); d != "" {
		t.Errorf("Acquire by another owner returned holder (-want +got):\n%s", d)
	}
	WantErr(t, "Release by another owner", s.Release(ctx, l.Key, "owner-2"), store.ErrNotOwner)
	WantErr(t, "Release by owner", s.Release(ctx, l.Key, "owner-1"), nil)
	_, err = s.Get(ctx, l.Key)
	WantErr(t, "Get after Release", err, store.ErrNotFound)
	WantErr(t, "second Release", s.Release(ctx, l.Key, "owner-1"), store.ErrNotFound)
	MustAcquire(t, s, other)

	// Another instance of the same broker is another lock.
	MustAcquire(t, s, Lock("i2", "owner-3", time.Hour))
}

func testAcquireBySameOwner(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l := Lock("i1", "owner-1", time.Hour)
	MustAcquire(t, s, l)
	again := l
	again.Kind, again.Deadline = store.KindUpdate, T0.Add(2*time.Hour)
	if got := MustAcquire(t, s, again); !cmp.Equal(again, got) {
		t.Errorf("second Acquire by the owner returned %+v, want %+v", got, again)
	}
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(again, got) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, again)
	}
}

func testInvalid(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	valid := Lock("i1", "owner-1", time.Hour)
	tests := []struct {
		name   string
		change func(l *store.Lock)
	}{
		{"no key", func(l *store.Lock) { l.Key = "" }},
		{"no owner", func(l *store.Lock) { l.Owner = "" }},
		{"unknown kind", func(l *store.Lock) { l.Kind = "poll" }},
		{"no deadline", func(l *store.Lock) { l.Deadline = time.Time{} }},
		{"deadline now", func(l *store.Lock) { l.Deadline = T0 }},
		{"deadline past", func(l *store.Lock) { l.Deadline = T0.Add(-time.Second) }},
		{"operation too long", func(l *store.Lock) { l.Operation = strings.Repeat("x", store.MaxOperationLen+1) }},
		{"year 10000", func(l *store.Lock) { l.Deadline = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := valid
			tc.change(&l)
			_, err := s.Acquire(ctx, l)
			WantErr(t, "Acquire", err, store.ErrInvalid)
			WantErr(t, "Update", s.Update(ctx, l), store.ErrInvalid)
		})
	}
	if got, err := s.List(ctx, store.ListFilter{}); err != nil || len(got) != 0 {
		t.Errorf("List after invalid calls = %v, %v; want none", got, err)
	}
	year10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	for name, o := range map[string]store.Orphan{
		"no id":                   {Kind: store.KindUnbind},
		"kind provision":          {ID: "o1", Kind: store.KindProvision},
		"ClaimedBy without until": {ID: "o1", Kind: store.KindUnbind, ClaimedBy: "replica-a"},
		"ClaimedUntil without by": {ID: "o1", Kind: store.KindUnbind, ClaimedUntil: T0.Add(time.Hour)},
		"ClaimedUntil year 10000": {ID: "o1", Kind: store.KindUnbind, ClaimedBy: "r", ClaimedUntil: year10000},
		"NextAttempt year 10000":  {ID: "o1", Kind: store.KindUnbind, NextAttempt: year10000},
	} {
		WantErr(t, "PutOrphan with "+name, s.PutOrphan(ctx, o), store.ErrInvalid)
	}
	if got, err := s.ListOrphans(ctx); err != nil || len(got) != 0 {
		t.Errorf("ListOrphans after invalid calls = %v, %v; want none", got, err)
	}
}

// testFarDeadline takes a lock until the last storable year: no TTL or
// index arithmetic may overflow.
func testFarDeadline(t *testing.T, b Backend) {
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l := Lock("i1", "owner-1", 0)
	l.Deadline = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	MustAcquire(t, s, l)
	if got, err := s.Get(context.Background(), l.Key); err != nil || !cmp.Equal(l, got) {
		t.Errorf("Get = %+v, %v; want %+v", got, err, l)
	}
}

func testUpdate(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	l := MustAcquire(t, s, Lock("i1", "owner-1", time.Minute))

	async := l
	async.Async, async.Operation = true, strings.Repeat("op-", store.MaxOperationLen/3)
	async.Deadline = T0.Add(24 * time.Hour)
	WantErr(t, "Update by another owner", s.Update(ctx, store.Lock{
		Key: l.Key, Owner: "owner-2", Kind: store.KindProvision, Deadline: async.Deadline,
	}), store.ErrNotOwner)
	WantErr(t, "Update by owner", s.Update(ctx, async), nil)
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(async, got) {
		t.Errorf("Get after Update = %v; diff (-want +got):\n%s", err, cmp.Diff(async, got))
	}

	// The new deadline holds: past the old one, the lock is still there.
	c.Advance(time.Hour)
	if _, err := s.Acquire(ctx, Lock("i1", "owner-2", 2*time.Hour)); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Acquire past the old deadline: %v, want ErrHeld", err)
	}
	missing := Lock("i9", "owner-1", 2*time.Hour)
	WantErr(t, "Update of a missing lock", s.Update(ctx, missing), store.ErrNotFound)
}

func testExpiry(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	l := MustAcquire(t, s, Lock("i1", "owner-1", time.Minute))

	c.Advance(time.Minute - time.Microsecond)
	if got, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(l, got) {
		t.Errorf("Get 1µs before the deadline = %+v, %v; want the lock", got, err)
	}
	_, err := s.Acquire(ctx, Lock("i1", "owner-2", 2*time.Hour))
	WantErr(t, "Acquire 1µs before the deadline", err, store.ErrHeld)

	c.Advance(time.Microsecond) // now == Deadline: expired
	_, err = s.Get(ctx, l.Key)
	WantErr(t, "Get at the deadline", err, store.ErrNotFound)
	if got, err := s.List(ctx, store.ListFilter{}); err != nil || len(got) != 0 {
		t.Errorf("List at the deadline = %v, %v; want none", got, err)
	}
	later := l
	later.Deadline = c.Now().Add(time.Hour)
	WantErr(t, "Update at the deadline", s.Update(ctx, later), store.ErrNotFound)
	WantErr(t, "Release at the deadline", s.Release(ctx, l.Key, l.Owner), store.ErrNotFound)
	_, err = s.ForceRelease(ctx, l.Key)
	WantErr(t, "ForceRelease at the deadline", err, store.ErrNotFound)

	// Acquire takes the key over and says from what (Replaced), so the
	// caller can do what the sweep would have; the stored lock has none.
	next := Lock("i1", "owner-2", 2*time.Hour)
	want := next
	want.Replaced = &l
	if got := MustAcquire(t, s, next); !cmp.Equal(want, got) {
		t.Errorf("Acquire of the expired lock returned %+v, want %+v", got, want)
	}
	if got, err := s.Get(ctx, next.Key); err != nil || !cmp.Equal(next, got) {
		t.Errorf("Get after the takeover = %+v, %v; want %+v", got, err, next)
	}
	if got, err := s.ExpireDue(ctx, c.Now().Add(time.Hour-time.Microsecond)); err != nil || len(got) != 0 {
		t.Errorf("ExpireDue after the takeover = %v, %v; want none: the taken-over lock is gone", got, err)
	}
	// A re-acquire of one's own expired lock replaces nothing of another.
	c.Advance(2 * time.Hour)
	again := Lock("i1", "owner-2", 0)
	again.Started, again.Deadline = c.Now(), c.Now().Add(time.Hour)
	if got := MustAcquire(t, s, again); !cmp.Equal(again, got) {
		t.Errorf("Acquire of one's own expired lock returned %+v, want %+v", got, again)
	}
}

func testForceRelease(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	l := MustAcquire(t, s, Lock("i1", "owner-1", time.Hour))
	got, err := s.ForceRelease(ctx, l.Key)
	if err != nil || !cmp.Equal(l, got) {
		t.Errorf("ForceRelease = %+v, %v; want %+v", got, err, l)
	}
	_, err = s.Get(ctx, l.Key)
	WantErr(t, "Get after ForceRelease", err, store.ErrNotFound)
	_, err = s.ForceRelease(ctx, l.Key)
	WantErr(t, "second ForceRelease", err, store.ErrNotFound)
	WantErr(t, "Release by the old owner", s.Release(ctx, l.Key, l.Owner), store.ErrNotFound)
}
