package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of the expiry index: ExpiringBindings and CountExpiring.

// expiringBinding is Binding expiring at T0 plus in (never for 0).
func expiringBinding(broker, id, binding string, in time.Duration) store.Binding {
	b := Binding(broker, id, binding)
	b.ExpiresAt, b.RenewBefore = time.Time{}, time.Time{}
	if in != 0 {
		b.ExpiresAt = T0.Add(in)
	}
	return b
}

// bindingNames names bindings as "broker/instance/binding".
func bindingNames(bs []store.Binding) []string {
	out := []string{}
	for _, b := range bs {
		out = append(out, b.Broker+"/"+b.InstanceID+"/"+b.BindingID)
	}
	return out
}

// checkExpiring compares ExpiringBindings(broker, before, limit) with want,
// by name, and each binding returned with GetBinding's.
func checkExpiring(t *testing.T, s store.Store, broker string, before time.Time, limit int, want ...string) {
	t.Helper()
	ctx := context.Background()
	got, err := s.ExpiringBindings(ctx, broker, before, limit)
	if err != nil {
		t.Fatalf("ExpiringBindings(%q, %s, %d): %v", broker, before, limit, err)
	}
	if want == nil {
		want = []string{}
	}
	if d := cmp.Diff(want, bindingNames(got)); d != "" {
		t.Errorf("ExpiringBindings(%q, t0%+v, %d) (-want +got):\n%s", broker, before.Sub(T0), limit, d)
	}
	for _, b := range got {
		stored, err := s.GetBinding(ctx, b.Broker, b.InstanceID, b.BindingID)
		if d := cmp.Diff(stored, b); err != nil || d != "" {
			t.Errorf("ExpiringBindings returned %s/%s/%s unlike GetBinding (%v):\n%s", b.Broker, b.InstanceID, b.BindingID, err, d)
		}
	}
}

func checkCountExpiring(t *testing.T, s store.Store, before time.Time, want map[string]int) {
	t.Helper()
	got, err := s.CountExpiring(context.Background(), before)
	if d := cmp.Diff(want, got); err != nil || d != "" {
		t.Errorf("CountExpiring(t0%+v) = %v; (-want +got):\n%s", before.Sub(T0), err, d)
	}
}

func testInventoryExpiring(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	week := T0.Add(7 * 24 * time.Hour)
	checkExpiring(t, s, "", week, 0)
	checkCountExpiring(t, s, week, map[string]int{})

	MustPutInstance(t, s, Instance("b1", "i1", "x"))
	for _, bd := range []store.Binding{
		expiringBinding("b1", "i1", "x1", time.Hour),
		expiringBinding("b1", "i1", "x2", 0), // no expires_at: never listed
		expiringBinding("b1", "i2", "x1", 2*time.Hour),
		expiringBinding("b2", "i1", "x1", time.Hour), // the same time as b1/i1/x1: by broker
		expiringBinding("b2", "i3", "x9", -time.Hour),
		expiringBinding("b1", "i4", "x1", 10*24*time.Hour),
	} {
		MustPutBinding(t, s, bd)
	}
	checkExpiring(t, s, "", week, 0, "b2/i3/x9", "b1/i1/x1", "b2/i1/x1", "b1/i2/x1")
	checkExpiring(t, s, "b1", week, 0, "b1/i1/x1", "b1/i2/x1")
	checkExpiring(t, s, "b2", week, 1, "b2/i3/x9")
	checkExpiring(t, s, "", week, 2, "b2/i3/x9", "b1/i1/x1")
	checkExpiring(t, s, "", T0.Add(time.Hour), 0, "b2/i3/x9") // before is exclusive
	checkExpiring(t, s, "", T0.Add(time.Hour+time.Microsecond), 0, "b2/i3/x9", "b1/i1/x1", "b2/i1/x1")
	checkExpiring(t, s, "nobody", week, 0)
	checkCountExpiring(t, s, week, map[string]int{"b1": 2, "b2": 2})
	checkCountExpiring(t, s, T0, map[string]int{"b2": 1})

	// A put moves the entry, or drops it without an expires_at.
	MustPutBinding(t, s, expiringBinding("b1", "i2", "x1", 30*24*time.Hour))
	MustPutBinding(t, s, expiringBinding("b1", "i4", "x1", 3*time.Hour))
	MustPutBinding(t, s, expiringBinding("b1", "i1", "x1", 0))
	checkExpiring(t, s, "", week, 0, "b2/i3/x9", "b2/i1/x1", "b1/i4/x1")
	// Deletes take the entries with them.
	if err := s.DeleteBinding(ctx, "b2", "i1", "x1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteInstance(ctx, "b2", "i3"); err != nil {
		t.Fatal(err)
	}
	checkExpiring(t, s, "", week, 0, "b1/i4/x1")
	checkCountExpiring(t, s, week, map[string]int{"b1": 1})
	MustPutBinding(t, s, expiringBinding("b1", "i1", "x1", time.Hour))
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatal(err)
	}
	checkExpiring(t, s, "", week, 0, "b1/i4/x1")

	// An import without replace keeps the entry of what it keeps; with
	// replace, it moves it.
	imported := expiringBinding("b1", "i4", "x1", time.Minute)
	fresh := expiringBinding("b3", "i1", "x1", 5*time.Hour)
	if _, err := s.Import(ctx, []store.Entry{{Binding: &imported}, {Binding: &fresh}}, false); err != nil {
		t.Fatal(err)
	}
	checkExpiring(t, s, "", week, 0, "b1/i4/x1", "b3/i1/x1")
	if _, err := s.Import(ctx, []store.Entry{{Binding: &imported}}, true); err != nil {
		t.Fatal(err)
	}
	checkExpiring(t, s, "", T0.Add(time.Hour), 0, "b1/i4/x1")
	checkCountExpiring(t, s, week, map[string]int{"b1": 1, "b3": 1})

	if _, err := s.ExpiringBindings(ctx, "b\x00", week, 0); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("ExpiringBindings of a broker with a NUL byte: %v, want ErrInvalid", err)
	}
	if b.Reopen != nil {
		s = b.Reopen(t, s, osbtest.NewClock(T0).Now)
		checkExpiring(t, s, "", week, 0, "b1/i4/x1", "b3/i1/x1")
	}
}

// testInventoryExpiringLimit fills more expiring bindings than a page: the
// limit keeps the soonest, across brokers, at most MaxListLimit.
func testInventoryExpiringLimit(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	var entries []store.Entry
	for i := range store.MaxListLimit + 10 {
		bd := store.Binding{Broker: fmt.Sprintf("b%d", i%3), InstanceID: fmt.Sprintf("i%04d", i), BindingID: "x",
			ExpiresAt: T0.Add(time.Duration(store.MaxListLimit+10-i) * time.Minute)}
		entries = append(entries, store.Entry{Binding: &bd})
	}
	if _, err := s.Import(ctx, entries, false); err != nil {
		t.Fatal(err)
	}
	got, err := s.ExpiringBindings(ctx, "", T0.Add(365*24*time.Hour), store.MaxListLimit+5)
	if err != nil || len(got) != store.MaxListLimit {
		t.Fatalf("ExpiringBindings with a limit above MaxListLimit = %d bindings, %v; want %d", len(got), err, store.MaxListLimit)
	}
	if got[0].InstanceID != fmt.Sprintf("i%04d", store.MaxListLimit+9) || got[store.MaxListLimit-1].InstanceID != "i0010" {
		t.Errorf("ExpiringBindings returned %s … %s, want the soonest: i%04d … i0010",
			got[0].InstanceID, got[store.MaxListLimit-1].InstanceID, store.MaxListLimit+9)
	}
	if got, _ := s.ExpiringBindings(ctx, "b1", T0.Add(365*24*time.Hour), 0); len(got) != store.DefaultListLimit {
		t.Errorf("ExpiringBindings with limit 0 = %d bindings, want DefaultListLimit (%d)", len(got), store.DefaultListLimit)
	}
	counts, err := s.CountExpiring(ctx, T0.Add(365*24*time.Hour))
	if want := (map[string]int{"b0": 337, "b1": 337, "b2": 336}); err != nil || !cmp.Equal(want, counts) {
		t.Errorf("CountExpiring = %v, %v; want %v", counts, err, want)
	}
}
