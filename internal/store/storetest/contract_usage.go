package storetest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of the usage records: what deletions and plan changes leave
// for the usage report, UsageRecords and PurgeUsage. The tests join the
// inventory's (testInventoryContract), so every backend runs them.

// usageRecords returns UsageRecords(broker, after), sorted by Deleted,
// InstanceID, BindingID and PlanID.
func usageRecords(t *testing.T, s store.Store, broker string, after time.Time) []store.UsageRecord {
	t.Helper()
	out := []store.UsageRecord{}
	for r, err := range s.UsageRecords(context.Background(), broker, after) {
		if err != nil {
			t.Fatalf("UsageRecords(%q, %s): %v", broker, after, err)
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b store.UsageRecord) int {
		return cmp.Or(a.Deleted.Compare(b.Deleted), cmp.Compare(a.Broker, b.Broker), cmp.Compare(a.InstanceID, b.InstanceID),
			cmp.Compare(a.BindingID, b.BindingID), cmp.Compare(a.PlanID, b.PlanID))
	})
	return out
}

func testUsageRecords(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	created := T0.Add(-time.Hour) // Instance's Created

	in := Instance("b1", "i1", "cf1")
	MustPutInstance(t, s, in)
	MustPutBinding(t, s, Binding("b1", "i1", "x1"))
	MustPutInstance(t, s, Instance("b2", "i9", "cf2"))
	if got := usageRecords(t, s, "", time.Time{}); len(got) != 0 {
		t.Fatalf("usage records before any deletion: %v", got)
	}

	c.Advance(time.Hour) // T0+1h: update to plan-2, then an update keeping it
	in.PlanID, in.Updated = "plan-2", time.Time{}
	MustPutInstance(t, s, in)
	in.Context = nil
	MustPutInstance(t, s, in)

	c.Advance(time.Hour) // T0+2h: unbind x1, bind x2
	if err := s.DeleteBinding(ctx, "b1", "i1", "x1"); err != nil {
		t.Fatal(err)
	}
	x2 := Binding("b1", "i1", "x2")
	x2.Created = T0.Add(2 * time.Hour)
	MustPutBinding(t, s, x2)

	c.Advance(time.Hour) // T0+3h: deprovision, taking x2 with it
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatal(err)
	}
	_, err := s.DeleteInstance(ctx, "b1", "i1")
	WantErr(t, "DeleteInstance again", err, store.ErrNotFound)
	WantErr(t, "DeleteBinding of nothing", s.DeleteBinding(ctx, "b1", "i1", "x1"), store.ErrNotFound)

	c.Advance(time.Hour) // T0+4h: another broker
	if _, err := s.DeleteInstance(ctx, "b2", "i9"); err != nil {
		t.Fatal(err)
	}

	at := func(h int) time.Time { return T0.Add(time.Duration(h) * time.Hour) }
	all := []store.UsageRecord{
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1", Created: created, Deleted: at(1)},
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1", BindingID: "x1", Created: T0, Deleted: at(2)},
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-2", InstanceID: "i1", Created: created, Deleted: at(3)},
		{Tenant: "cf1", Broker: "b1", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i1", BindingID: "x2", Created: at(2), Deleted: at(3)},
		{Tenant: "cf2", Broker: "b2", ServiceID: "svc-1", PlanID: "plan-1", InstanceID: "i9", Created: created, Deleted: at(4)},
	}
	for _, tc := range []struct {
		name   string
		broker string
		after  time.Time
		want   []store.UsageRecord
	}{
		{"all", "", time.Time{}, all},
		{"after the plan change", "", at(1), all[1:]},
		{"a microsecond before it", "", at(1).Add(-time.Microsecond), all},
		{"one broker", "b2", time.Time{}, all[4:]},
		{"after the last", "", at(4), []store.UsageRecord{}},
	} {
		if d := gocmp.Diff(tc.want, usageRecords(t, s, tc.broker, tc.after)); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}

	if b.Reopen != nil {
		s = b.Reopen(t, s, c.Now)
		if d := gocmp.Diff(all, usageRecords(t, s, "", time.Time{})); d != "" {
			t.Errorf("after restart (-want +got):\n%s", d)
		}
	}

	n, err := s.PurgeUsage(ctx, at(3)) // Deleted before: the first two
	if err != nil || n != 2 {
		t.Errorf("PurgeUsage(t0+3h) = %d, %v; want 2", n, err)
	}
	if d := gocmp.Diff(all[2:], usageRecords(t, s, "", time.Time{})); d != "" {
		t.Errorf("after the purge (-want +got):\n%s", d)
	}
	if n, err := s.PurgeUsage(ctx, at(3)); err != nil || n != 0 {
		t.Errorf("PurgeUsage again = %d, %v; want 0", n, err)
	}
	ctxDone, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.PurgeUsage(ctxDone, at(9)); err == nil {
		t.Error("PurgeUsage with a done context succeeded")
	}
	for _, err := range s.UsageRecords(ctxDone, "", time.Time{}) {
		if err == nil {
			t.Error("UsageRecords with a done context yielded a record")
		}
	}
}

// testUsagePages deletes more bindings than a page, most in the same
// microsecond, and purges more than a batch.
func testUsagePages(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	const same, later = store.UsagePage + 200, 300
	var entries []store.Entry
	for i := range same + later {
		bd := Binding("b1", "i1", fmt.Sprintf("x%04d", i))
		entries = append(entries, store.Entry{Binding: &bd})
	}
	if _, err := s.Import(ctx, entries, false); err != nil {
		t.Fatal(err)
	}
	for i := range same + later {
		if i == same {
			c.Advance(time.Second)
		}
		if err := s.DeleteBinding(ctx, "b1", "i1", fmt.Sprintf("x%04d", i)); err != nil {
			t.Fatal(err)
		}
	}
	got := usageRecords(t, s, "", time.Time{})
	seen := map[string]bool{}
	for _, r := range got {
		seen[r.BindingID] = true
	}
	if len(got) != same+later || len(seen) != same+later {
		t.Errorf("UsageRecords yielded %d records of %d bindings; want %d", len(got), len(seen), same+later)
	}
	if got := usageRecords(t, s, "b1", T0); len(got) != later {
		t.Errorf("UsageRecords after t0 yielded %d; want %d", len(got), later)
	}
	if n, err := s.PurgeUsage(ctx, T0.Add(time.Hour)); err != nil || n != same+later {
		t.Errorf("PurgeUsage = %d, %v; want %d", n, err, same+later)
	}
}
