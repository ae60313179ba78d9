package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of what a put keeps of the record it replaces (Created)
// and of PutInstanceCancelling, a provision's record and the
// cancellation of its instance's pending undo in one call.

// testInventoryKeepsCreated: a put without a Created keeps the Created of
// the instance or binding it replaces (and the usage record of a plan
// change has it too); with one, it stores that; a record deleted and put
// again is new.
func testInventoryKeepsCreated(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	in := Instance("b1", "i1", "cf1")
	in.Created, in.Updated = time.Time{}, time.Time{}
	if got := MustPutInstance(t, s, in); !got.Created.Equal(T0) {
		t.Fatalf("PutInstance of a new instance: Created %v, want %v", got.Created, T0)
	}
	c.Advance(time.Hour)
	again := in
	again.Tenant, again.PlanID = "cf2", "plan-2" // all but the key may change
	want := again
	want.Created, want.Updated = T0, T0.Add(time.Hour)
	if got := MustPutInstance(t, s, again); !cmp.Equal(want, got) {
		t.Errorf("PutInstance over a record returned (-want +got):\n%s", cmp.Diff(want, got))
	}
	if got, err := s.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetInstance after a put over a record = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	var used []store.UsageRecord
	for r, err := range s.UsageRecords(ctx, "b1", time.Time{}) {
		if err != nil {
			t.Fatal(err)
		}
		used = append(used, r)
	}
	wantUsed := []store.UsageRecord{{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1",
		Created: T0, Deleted: T0.Add(time.Hour)}}
	if d := cmp.Diff(wantUsed, used); d != "" {
		t.Errorf("usage records of the plan change (-want +got):\n%s", d)
	}
	// A Created given is stored as it is.
	given := again
	given.Created = T0.Add(30 * time.Minute)
	if got := MustPutInstance(t, s, given); !got.Created.Equal(given.Created) {
		t.Errorf("PutInstance with a Created: Created %v, want %v", got.Created, given.Created)
	}
	// Deleted and provisioned again: a new record.
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	if got := MustPutInstance(t, s, in); !got.Created.Equal(T0.Add(2 * time.Hour)) {
		t.Errorf("PutInstance after DeleteInstance: Created %v, want %v", got.Created, T0.Add(2*time.Hour))
	}
	// An instance the inventory knows by a binding only has no Created
	// to keep.
	MustPutBinding(t, s, Binding("b1", "i2", "x1"))
	in2 := in
	in2.InstanceID = "i2"
	if got := MustPutInstance(t, s, in2); !got.Created.Equal(c.Now()) {
		t.Errorf("PutInstance of an instance with a binding only: Created %v, want %v", got.Created, c.Now())
	}

	// Bindings alike.
	bd := Binding("b1", "i1", "x1")
	bd.Created, bd.Updated = time.Time{}, time.Time{}
	first := MustPutBinding(t, s, bd)
	c.Advance(time.Hour)
	bd.AppGUID = "app-2"
	wantB := bd
	wantB.Created, wantB.Updated = first.Created, c.Now()
	if got := MustPutBinding(t, s, bd); !cmp.Equal(wantB, got) {
		t.Errorf("PutBinding over a record returned (-want +got):\n%s", cmp.Diff(wantB, got))
	}
	if got, err := s.GetBinding(ctx, "b1", "i1", "x1"); err != nil || !cmp.Equal(wantB, got) {
		t.Errorf("GetBinding after a put over a record = %v; diff (-want +got):\n%s", err, cmp.Diff(wantB, got))
	}
	givenB := bd
	givenB.Created = T0
	if got := MustPutBinding(t, s, givenB); !got.Created.Equal(T0) {
		t.Errorf("PutBinding with a Created: Created %v, want %v", got.Created, T0)
	}
	if err := s.DeleteBinding(ctx, "b1", "i1", "x1"); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Hour)
	if got := MustPutBinding(t, s, bd); !got.Created.Equal(c.Now()) {
		t.Errorf("PutBinding after DeleteBinding: Created %v, want %v", got.Created, c.Now())
	}
	// Another binding of the instance is another record.
	other := bd
	other.BindingID = "x2"
	c.Advance(time.Hour)
	if got := MustPutBinding(t, s, other); !got.Created.Equal(c.Now()) {
		t.Errorf("PutBinding of a second binding: Created %v, want %v", got.Created, c.Now())
	}
}

// testPutInstanceCancelling: the put is PutInstance's, and the orphan
// named goes with it, claimed or not; no other orphan is touched.
func testPutInstanceCancelling(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	o1, o2 := mustPutOrphan(t, s, Orphan("o1", T0)), mustPutOrphan(t, s, Orphan("o2", T0))
	in := Instance("b1", "i-o1", "cf1")
	in.Created, in.Updated = time.Time{}, time.Time{}
	put := func(what string, in store.Instance, orphanID string, wantCancelled bool) store.Instance {
		t.Helper()
		got, cancelled, err := s.PutInstanceCancelling(ctx, in, orphanID)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if cancelled != wantCancelled {
			t.Errorf("%s: cancelled %v, want %v", what, cancelled, wantCancelled)
		}
		if stored, err := s.GetInstance(ctx, in.Broker, in.InstanceID); err != nil || !cmp.Equal(got, stored) {
			t.Errorf("%s: GetInstance = %v; diff (-returned +stored):\n%s", what, err, cmp.Diff(got, stored))
		}
		return got
	}
	want := in
	want.Created, want.Updated = T0, T0
	if got := put("a new instance, its orphan pending", in, o1.ID, true); !cmp.Equal(want, got) {
		t.Errorf("PutInstanceCancelling returned (-want +got):\n%s", cmp.Diff(want, got))
	}
	_, err := s.GetOrphan(ctx, o1.ID)
	WantErr(t, "GetOrphan of the orphan cancelled", err, store.ErrNotFound)
	if due, err := s.DueOrphans(ctx, T0, 0); err != nil || !cmp.Equal([]store.Orphan{o2}, due) {
		t.Errorf("DueOrphans after the cancellation = %v; diff (-want +got):\n%s", err, cmp.Diff([]store.Orphan{o2}, due))
	}
	c.Advance(time.Minute)
	if got := put("the same again, no orphan pending", in, o1.ID, false); !got.Created.Equal(T0) {
		t.Errorf("PutInstanceCancelling over a record: Created %v, want %v (kept)", got.Created, T0)
	}
	put("no orphan named", in, "", false)

	// A claimed orphan goes too; a put over a record cancels as well.
	if _, err := s.ClaimOrphan(ctx, o2.ID, "replica-a", c.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	put("over a record, its orphan claimed", in, o2.ID, true)
	if got, err := s.ListOrphans(ctx); err != nil || len(got) != 0 {
		t.Errorf("ListOrphans = %v, %v; want none", got, err)
	}

	// A record that does not validate changes nothing.
	o3 := mustPutOrphan(t, s, Orphan("o3", T0))
	bad := in
	bad.InstanceID = ""
	_, _, err = s.PutInstanceCancelling(ctx, bad, o3.ID)
	WantErr(t, "PutInstanceCancelling of an invalid instance", err, store.ErrInvalid)
	if got, err := s.GetOrphan(ctx, o3.ID); err != nil || !cmp.Equal(o3, got) {
		t.Errorf("GetOrphan after a refused put = %v; diff (-want +got):\n%s", err, cmp.Diff(o3, got))
	}
}

// testAcquireReading: the lock as Acquire takes it (or its holder and
// ErrHeld), and the record of its instance as it is once the lock is
// taken; nothing for a lock not taken or an instance without a record.
func testAcquireReading(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	in := MustPutInstance(t, s, Instance("b1", "i1", "cf1"))
	l := Lock("i1", "owner-1", time.Hour)
	l.Started = time.Time{}
	want := l
	want.Started = T0
	got, rec, err := s.AcquireReading(ctx, l)
	if err != nil || !cmp.Equal(want, got) {
		t.Fatalf("AcquireReading = %v; lock (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	if rec == nil || !cmp.Equal(in, *rec) {
		t.Errorf("AcquireReading read %v, want the instance's record", rec)
	}
	if held, err := s.Get(ctx, l.Key); err != nil || !cmp.Equal(want, held) {
		t.Errorf("Get after AcquireReading = %v; diff (-want +got):\n%s", err, cmp.Diff(want, held))
	}

	// Held by another owner: the holder, and no record.
	other := Lock("i1", "owner-2", time.Hour)
	holder, rec, err := s.AcquireReading(ctx, other)
	WantErr(t, "AcquireReading of a lock held", err, store.ErrHeld)
	if !cmp.Equal(want, holder) || rec != nil {
		t.Errorf("AcquireReading of a lock held returned %+v and %v, want the holder and no record", holder, rec)
	}
	// By its owner again: taken, as Acquire.
	if _, rec, err := s.AcquireReading(ctx, l); err != nil || rec == nil {
		t.Errorf("AcquireReading by the owner again: %v, record %v", err, rec)
	}

	// Expired: taken over, the lock replaced named.
	c.Advance(2 * time.Hour)
	other.Deadline = c.Now().Add(time.Hour)
	got, rec, err = s.AcquireReading(ctx, other)
	if err != nil || got.Replaced == nil || got.Replaced.Owner != "owner-1" || rec == nil {
		t.Errorf("AcquireReading of an expired lock = %+v, record %v, %v; want it taken over and the record", got, rec, err)
	}

	// An instance without a record; a binding's lock reads its instance.
	got, rec, err = s.AcquireReading(ctx, Lock("i2", "owner-3", 10*time.Hour))
	if err != nil || rec != nil || got.Owner != "owner-3" {
		t.Errorf("AcquireReading of an instance without a record = %+v, %v, %v; want the lock and no record", got, rec, err)
	}
	bl := Lock("i1", "owner-4", 10*time.Hour)
	bl.Key, bl.Kind, bl.BindingID = store.BindingLockKey("b1", "i1", "x1"), store.KindBind, "x1"
	if _, rec, err := s.AcquireReading(ctx, bl); err != nil || rec == nil || rec.InstanceID != "i1" {
		t.Errorf("AcquireReading of a binding's lock = %v, record %v; want the instance's record", err, rec)
	}

	// A lock that does not name its instance, or not valid: nothing
	// taken.
	for _, bad := range []func(*store.Lock){
		func(l *store.Lock) { l.Broker = "" },
		func(l *store.Lock) { l.InstanceID = "" },
		func(l *store.Lock) { l.Owner = "" },
	} {
		x := Lock("i3", "owner-5", 10*time.Hour)
		bad(&x)
		_, _, err := s.AcquireReading(ctx, x)
		WantErr(t, "AcquireReading of an invalid lock", err, store.ErrInvalid)
	}
	_, err = s.Get(ctx, Lock("i3", "", time.Hour).Key)
	WantErr(t, "Get after AcquireReading refused", err, store.ErrNotFound)
}
