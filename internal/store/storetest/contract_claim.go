package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of orphan claims: ClaimOrphan, and DueOrphans skipping
// live claims.

func mustPutOrphan(t *testing.T, s store.Store, o store.Orphan) store.Orphan {
	t.Helper()
	if err := s.PutOrphan(context.Background(), o); err != nil {
		t.Fatalf("PutOrphan(%s): %v", o.ID, err)
	}
	return o
}

// claimed is o as ClaimOrphan leaves it.
func claimed(o store.Orphan, claimant string, until time.Time) store.Orphan {
	o.ClaimedBy, o.ClaimedUntil = claimant, until
	return o
}

func testClaimOrphan(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	o := mustPutOrphan(t, s, Orphan("o1", T0))
	wantOrphan := func(what string, want store.Orphan) {
		t.Helper()
		if got, err := s.GetOrphan(ctx, o.ID); err != nil || !cmp.Equal(want, got) {
			t.Errorf("GetOrphan %s = %v; diff (-want +got):\n%s", what, err, cmp.Diff(want, got))
		}
	}

	byA := claimed(o, "replica-a", T0.Add(time.Minute))
	got, err := s.ClaimOrphan(ctx, o.ID, "replica-a", T0.Add(time.Minute))
	if err != nil || !cmp.Equal(byA, got) {
		t.Errorf("ClaimOrphan by a = %v; diff (-want +got):\n%s", err, cmp.Diff(byA, got))
	}
	wantOrphan("after the claim", byA)

	got, err = s.ClaimOrphan(ctx, o.ID, "replica-b", T0.Add(time.Hour))
	WantErr(t, "ClaimOrphan by b during a's claim", err, store.ErrHeld)
	if d := cmp.Diff(byA, got); d != "" {
		t.Errorf("ClaimOrphan by b returned (-want +got):\n%s", d)
	}
	wantOrphan("after b's refused claim", byA)

	// The claimant renews, to a later or an earlier time.
	renewed := claimed(o, "replica-a", T0.Add(30*time.Second))
	if got, err := s.ClaimOrphan(ctx, o.ID, "replica-a", renewed.ClaimedUntil); err != nil || !cmp.Equal(renewed, got) {
		t.Errorf("renewal by a = %v; diff (-want +got):\n%s", err, cmp.Diff(renewed, got))
	}

	c.Advance(30*time.Second - time.Microsecond) // 1µs before the claim lapses
	_, err = s.ClaimOrphan(ctx, o.ID, "replica-b", T0.Add(time.Hour))
	WantErr(t, "ClaimOrphan by b 1µs before a's claim lapses", err, store.ErrHeld)
	c.Advance(time.Microsecond) // now == ClaimedUntil: lapsed
	byB := claimed(o, "replica-b", T0.Add(time.Hour))
	if got, err := s.ClaimOrphan(ctx, o.ID, "replica-b", byB.ClaimedUntil); err != nil || !cmp.Equal(byB, got) {
		t.Errorf("ClaimOrphan by b after a's claim lapsed = %v; diff (-want +got):\n%s", err, cmp.Diff(byB, got))
	}

	// The claimant reschedules: PutOrphan with the claim cleared.
	next := o
	next.Attempts, next.LastError, next.NextAttempt = 1, "broker answered 500", T0.Add(2*time.Hour)
	mustPutOrphan(t, s, next)
	wantOrphan("after rescheduling", next)
	if got, err := s.ClaimOrphan(ctx, o.ID, "replica-a", T0.Add(time.Hour)); err != nil ||
		!cmp.Equal(claimed(next, "replica-a", T0.Add(time.Hour)), got) {
		t.Errorf("ClaimOrphan by a after rescheduling = %+v, %v", got, err)
	}

	// DeleteOrphan ignores claims.
	WantErr(t, "DeleteOrphan of a claimed orphan", s.DeleteOrphan(ctx, o.ID), nil)
	_, err = s.ClaimOrphan(ctx, o.ID, "replica-a", T0.Add(time.Hour))
	WantErr(t, "ClaimOrphan of a deleted orphan", err, store.ErrNotFound)
}

func testClaimInvalid(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	o := mustPutOrphan(t, s, Orphan("o1", T0))
	tests := []struct {
		name, id, claimant string
		until              time.Time
	}{
		{"no id", "", "replica-a", T0.Add(time.Hour)},
		{"no claimant", "o1", "", T0.Add(time.Hour)},
		{"until now", "o1", "replica-a", T0},
		{"until past", "o1", "replica-a", T0.Add(-time.Second)},
		{"until zero", "o1", "replica-a", time.Time{}},
		{"until year 10000", "o1", "replica-a", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.ClaimOrphan(ctx, tc.id, tc.claimant, tc.until)
			WantErr(t, "ClaimOrphan", err, store.ErrInvalid)
		})
	}
	if got, err := s.GetOrphan(ctx, o.ID); err != nil || !cmp.Equal(o, got) {
		t.Errorf("GetOrphan after invalid claims = %+v, %v; want it unclaimed", got, err)
	}
	_, err := s.ClaimOrphan(ctx, "o2", "replica-a", T0.Add(time.Hour))
	WantErr(t, "ClaimOrphan of a missing orphan", err, store.ErrNotFound)
}

// testClaimKeepsFields claims an orphan whose strings need escaping, with
// a claim until the last storable microsecond: the claim changes nothing
// else (Redis decodes and re-encodes the record in a script).
func testClaimKeepsFields(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	o := Orphan("o/1 \"é\"", T0.Add(-time.Hour))
	o.Kind, o.BindingID, o.Attempts = store.KindUnbind, "bnd/1", 123456
	o.Reason = "quote \" slash / backslash \\ <tag> & \u2028 \x00\x01\t\n 日本 😀"
	o.LastError = `{"description":"bad"}`
	mustPutOrphan(t, s, o)
	until := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
	want := claimed(o, "replica \"a\"/1", until)
	if got, err := s.ClaimOrphan(ctx, o.ID, want.ClaimedBy, until); err != nil || !cmp.Equal(want, got) {
		t.Errorf("ClaimOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	if got, err := s.GetOrphan(ctx, o.ID); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	if due, err := s.DueOrphans(ctx, T0, 0); err != nil || len(due) != 0 {
		t.Errorf("DueOrphans = %v, %v; want none: the claim is live", due, err)
	}
	_, err := s.ClaimOrphan(ctx, o.ID, "replica-b", T0.Add(time.Hour))
	WantErr(t, "ClaimOrphan by another claimant", err, store.ErrHeld)
}

func testDueOrphansClaimed(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	var all []store.Orphan
	for i := range 6 {
		all = append(all, mustPutOrphan(t, s, Orphan(fmt.Sprint("o", i), T0.Add(time.Duration(i)*time.Second))))
	}
	// o0, o2 and o3 claimed until T0+1m; o4's claim has lapsed already.
	for _, i := range []int{0, 2, 3, 4} {
		if _, err := s.ClaimOrphan(ctx, all[i].ID, "replica-a", T0.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	lapsed := all[4]
	lapsed.ClaimedBy, lapsed.ClaimedUntil = "replica-z", T0.Add(-time.Second)
	mustPutOrphan(t, s, lapsed)
	o1, o4, o5 := all[1], lapsed, all[5]

	tests := []struct {
		name  string
		now   time.Time
		limit int
		want  []store.Orphan
	}{
		{"claimed skipped", T0.Add(time.Second * 10), 0, []store.Orphan{o1, o4, o5}},
		{"claimed not counted in limit", T0.Add(time.Second * 10), 2, []store.Orphan{o1, o4}},
		{"limit 1", T0.Add(time.Second * 10), 1, []store.Orphan{o1}},
		{"claims lapse at now", T0.Add(time.Minute), 0, []store.Orphan{
			claimed(all[0], "replica-a", T0.Add(time.Minute)), o1,
			claimed(all[2], "replica-a", T0.Add(time.Minute)),
			claimed(all[3], "replica-a", T0.Add(time.Minute)), o4, o5,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := s.DueOrphans(ctx, tc.now, tc.limit)
			if d := cmp.Diff(tc.want, got, cmpEmpty); err != nil || d != "" {
				t.Errorf("DueOrphans(limit %d) = %v; diff (-want +got):\n%s", tc.limit, err, d)
			}
		})
	}
}

// testClaimRaceOneWinner races claimants for one orphan: exactly one wins,
// and every other sees the winner's claim.
func testClaimRaceOneWinner(t *testing.T, b Backend) {
	const racers = 50
	s := b.Open(t, osbtest.NewClock(T0).Now)
	mustPutOrphan(t, s, Orphan("o1", T0))
	start := make(chan struct{})
	var wg sync.WaitGroup
	got := make([]store.Orphan, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = s.ClaimOrphan(context.Background(), "o1", fmt.Sprint("replica-", i), T0.Add(time.Hour))
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("replica-%d and replica-%d both claimed the orphan", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrHeld):
			t.Errorf("replica-%d: %v, want nil or ErrHeld", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("nobody claimed the orphan")
	}
	want := fmt.Sprint("replica-", winner)
	for i, o := range got {
		if o.ClaimedBy != want {
			t.Errorf("replica-%d sees the claim of %q, want %q", i, o.ClaimedBy, want)
		}
	}
	if o, err := s.GetOrphan(context.Background(), "o1"); err != nil || o.ClaimedBy != want {
		t.Errorf("GetOrphan = %+v, %v; want claimed by %s", o, err, want)
	}
}

// OldOrphanRecord is an orphan record as written before LockOwner and the
// claim fields existed.
const OldOrphanRecord = `{"id":"old1","broker":"b1","tenant":"cf1","kind":"deprovision",` +
	`"instance_id":"i-old1","service_id":"svc","plan_id":"plan","reason":"provision timed out",` +
	`"attempts":2,"next_attempt":"2031-05-06T07:08:09Z","created":"2031-05-06T07:08:09Z",` +
	`"last_error":"broker answered 500"}`

// OldOrphan is OldOrphanRecord decoded.
func OldOrphan() store.Orphan {
	o := Orphan("old1", T0)
	o.InstanceID, o.Attempts, o.LastError, o.LockOwner, o.HoldUntil = "i-old1", 2, "broker answered 500", "", time.Time{}
	return o
}

// CheckOldOrphanRecord checks that s serves an orphan record written before
// claims existed, which write stored under id old1 due at T0: it reads as
// unclaimed, is due, and can be claimed.
func CheckOldOrphanRecord(t *testing.T, s store.Store, write func(rec []byte)) {
	ctx := context.Background()
	write([]byte(OldOrphanRecord))
	old := OldOrphan()
	if got, err := s.GetOrphan(ctx, "old1"); err != nil || !cmp.Equal(old, got) {
		t.Errorf("GetOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(old, got))
	}
	if due, err := s.DueOrphans(ctx, T0, 0); err != nil || !cmp.Equal([]store.Orphan{old}, due) {
		t.Errorf("DueOrphans = %v; diff (-want +got):\n%s", err, cmp.Diff([]store.Orphan{old}, due))
	}
	want := claimed(old, "replica-a", T0.Add(time.Hour))
	if got, err := s.ClaimOrphan(ctx, "old1", "replica-a", T0.Add(time.Hour)); err != nil || !cmp.Equal(want, got) {
		t.Errorf("ClaimOrphan = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	if due, err := s.DueOrphans(ctx, T0, 0); err != nil || len(due) != 0 {
		t.Errorf("DueOrphans after the claim = %v, %v; want none", due, err)
	}
}
