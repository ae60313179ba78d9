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
