package storetest

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of listing and counting the inventory.

// names returns "broker/id" of each instance, for short diffs.
func names(ins []store.Instance) []string {
	var out []string
	for _, in := range ins {
		out = append(out, in.Broker+"/"+in.InstanceID)
	}
	return out
}

// listAll pages through ListInstances with limit and returns every
// instance and the number of pages.
func listAll(t *testing.T, s store.Store, f store.InstanceFilter, limit int) ([]store.Instance, int) {
	t.Helper()
	var all []store.Instance
	cursor, pages := "", 0
	for {
		page, next, err := s.ListInstances(context.Background(), f, cursor, limit)
		if err != nil {
			t.Fatalf("ListInstances(%+v, %q, %d): %v", f, cursor, limit, err)
		}
		all, pages = append(all, page...), pages+1
		if next == "" {
			return all, pages
		}
		if len(page) == 0 {
			t.Fatalf("ListInstances(%+v, %q, %d) returned an empty page and a next cursor", f, cursor, limit)
		}
		cursor = next
	}
}

// ListFixture puts instances of brokers and tenants whose names test the
// ordering and the key layout: ids extending others, names with glob and
// hash-tag characters, a broker that is another's prefix.
func ListFixture(t *testing.T, s store.Store) []store.Instance {
	var all []store.Instance
	for _, p := range []struct{ broker, id, tenant string }{
		{"b1", "i1", "x"}, {"b1", "i10", "y"}, {"b1", "i1-a", "x"}, {"b1", "i2", "x"},
		{"b1", "a*[?]", "y"}, {"b1", "z", ""},
		{"b", "i1", "x"}, {"b1x", "i1", "y"},
		{"{b}", "i1", "x"}, {"}b{", "i1", "x{y}"}, {"b%7B", "i1", "x"},
	} {
		all = append(all, MustPutInstance(t, s, Instance(p.broker, p.id, p.tenant)))
	}
	return all
}

func testInventoryList(t *testing.T, b Backend) {
	s := b.Open(t, osbtest.NewClock(T0).Now)
	ListFixture(t, s)
	tests := []struct {
		name string
		f    store.InstanceFilter
		want []string
	}{
		{"all, by broker then id", store.InstanceFilter{}, []string{
			"b/i1", "b%7B/i1", "b1/a*[?]", "b1/i1", "b1/i1-a", "b1/i10", "b1/i2", "b1/z", "b1x/i1", "{b}/i1", "}b{/i1"}},
		{"broker", store.InstanceFilter{Broker: "b1"}, []string{"b1/a*[?]", "b1/i1", "b1/i1-a", "b1/i10", "b1/i2", "b1/z"}},
		{"broker with braces", store.InstanceFilter{Broker: "{b}"}, []string{"{b}/i1"}},
		{"tenant", store.InstanceFilter{Tenant: "x"}, []string{"b/i1", "b%7B/i1", "b1/i1", "b1/i1-a", "b1/i2", "{b}/i1"}},
		{"tenant with braces", store.InstanceFilter{Tenant: "x{y}"}, []string{"}b{/i1"}},
		{"broker and tenant", store.InstanceFilter{Broker: "b1", Tenant: "y"}, []string{"b1/a*[?]", "b1/i10"}},
		{"unknown broker", store.InstanceFilter{Broker: "b2"}, nil},
		{"unknown tenant", store.InstanceFilter{Tenant: "w"}, nil},
		{"tenant extending another", store.InstanceFilter{Tenant: "x{"}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, limit := range []int{1, 2, 3, 0} {
				got, pages := listAll(t, s, tc.f, limit)
				if d := cmp.Diff(tc.want, names(got)); d != "" {
					t.Errorf("limit %d: listing (-want +got):\n%s", limit, d)
				}
				size := limit
				if limit == 0 {
					size = store.DefaultListLimit
				}
				if want := max(1, (len(tc.want)+size-1)/size); pages != want {
					t.Errorf("limit %d: %d pages, want %d", limit, pages, want)
				}
			}
		})
	}
	// Every listed record is whole.
	got, _ := listAll(t, s, store.InstanceFilter{Broker: "b1", Tenant: "x"}, 2)
	if want := Instance("b1", "i1", "x"); len(got) == 0 || !cmp.Equal(want, got[0]) {
		t.Errorf("listed record (-want +got):\n%s", cmp.Diff(want, got))
	}
	// Deleted and put again between two listings, an instance is listed
	// once.
	for range 2 {
		if _, err := s.DeleteInstance(context.Background(), "b1", "i1"); err != nil {
			t.Fatal(err)
		}
		MustPutInstance(t, s, Instance("b1", "i1", "x"))
	}
	got, _ = listAll(t, s, store.InstanceFilter{Broker: "b1"}, 0)
	if d := cmp.Diff(tests[1].want, names(got)); d != "" {
		t.Errorf("listing after a delete and a put (-want +got):\n%s", d)
	}
}

// testInventoryListPages checks page sizes and cursors: a cursor is a
// position, not a snapshot, and works across filters.
func testInventoryListPages(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	const n = 1205
	var entries []store.Entry
	for i := range n {
		in := Instance("b1", fmt.Sprintf("i%04d", i), fmt.Sprint("t", i%3))
		entries = append(entries, store.Entry{Instance: &in})
	}
	if _, err := s.Import(ctx, entries, true); err != nil {
		t.Fatal(err)
	}
	page, next, err := s.ListInstances(ctx, store.InstanceFilter{}, "", -5)
	if err != nil || len(page) != store.DefaultListLimit || next == "" {
		t.Fatalf("ListInstances with limit -5 = %d records, next %q, %v; want %d and more", len(page), next, err, store.DefaultListLimit)
	}
	big, bigNext, err := s.ListInstances(ctx, store.InstanceFilter{}, "", store.MaxListLimit+500)
	if err != nil || len(big) != store.MaxListLimit || bigNext == "" {
		t.Fatalf("ListInstances with limit %d = %d records, %v; want %d", store.MaxListLimit+500, len(big), err, store.MaxListLimit)
	}
	rest, last, err := s.ListInstances(ctx, store.InstanceFilter{}, bigNext, store.MaxListLimit)
	if err != nil || len(rest) != n-store.MaxListLimit || last != "" {
		t.Errorf("the last page = %d records, next %q, %v; want %d and no next", len(rest), last, err, n-store.MaxListLimit)
	}

	// Records deleted and added behind and ahead of a cursor.
	cursor := store.EncodeCursor("b1", "i0100")
	for _, id := range []string{"i0099", "i0100", "i0101"} {
		if _, err := s.DeleteInstance(ctx, "b1", id); err != nil {
			t.Fatal(err)
		}
	}
	MustPutInstance(t, s, Instance("b1", "i0100a", "t0"))
	MustPutInstance(t, s, Instance("b1", "i0050a", "t0"))
	page, _, err = s.ListInstances(ctx, store.InstanceFilter{}, cursor, 3)
	if d := cmp.Diff([]string{"b1/i0100a", "b1/i0102", "b1/i0103"}, names(page)); err != nil || d != "" {
		t.Errorf("page after a deleted cursor record = %v; diff (-want +got):\n%s", err, d)
	}
	// A cursor of one filter serves another.
	page, _, err = s.ListInstances(ctx, store.InstanceFilter{Broker: "b1", Tenant: "t1"}, cursor, 2)
	if d := cmp.Diff([]string{"b1/i0103", "b1/i0106"}, names(page)); err != nil || d != "" {
		t.Errorf("page of tenant t1 after the cursor = %v; diff (-want +got):\n%s", err, d)
	}
	// A cursor past a filter's broker ends its listing; one before starts it.
	for _, tc := range []struct {
		cursor string
		want   int
	}{{store.EncodeCursor("b2", "a"), 0}, {store.EncodeCursor("b0", "zzz"), 5}} {
		page, next, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1"}, tc.cursor, 5)
		if err != nil || len(page) != tc.want || (tc.want == 0) != (next == "") {
			t.Errorf("ListInstances(b1) after cursor %q = %d records, next %q, %v; want %d", tc.cursor, len(page), next, err, tc.want)
		}
	}
	all, _ := listAll(t, s, store.InstanceFilter{Tenant: "t2"}, 7)
	if want := 400; len(all) != want { // ids 2, 5, ..., 1202, less i0101
		t.Errorf("tenant t2 lists %d instances, want %d", len(all), want)
	}
}

// testInventoryTenantMoves replaces an instance with another tenant: the
// tenant listings and counts follow.
func testInventoryTenantMoves(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	MustPutInstance(t, s, Instance("b1", "i1", "x"))
	MustPutInstance(t, s, Instance("b1", "i1", "y"))
	MustPutInstance(t, s, Instance("b1", "i2", ""))
	MustPutInstance(t, s, Instance("b1", "i2", "x"))
	MustPutInstance(t, s, Instance("b1", "i3", "x"))
	MustPutInstance(t, s, Instance("b1", "i3", ""))
	for tenant, want := range map[string][]string{"x": {"b1/i2"}, "y": {"b1/i1"}, "": {"b1/i1", "b1/i2", "b1/i3"}} {
		f := store.InstanceFilter{Broker: "b1", Tenant: tenant}
		got, _ := listAll(t, s, f, 10)
		if d := cmp.Diff(want, names(got)); d != "" {
			t.Errorf("listing of tenant %q (-want +got):\n%s", tenant, d)
		}
		if n, err := s.CountInstances(ctx, f); err != nil || n != len(want) {
			t.Errorf("CountInstances(%+v) = %d, %v; want %d", f, n, err, len(want))
		}
	}
}

func testInventoryCount(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	if n, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil || n != 0 {
		t.Errorf("CountInstances of an empty store = %d, %v", n, err)
	}
	ListFixture(t, s)
	MustPutInstance(t, s, Instance("b1", "i1", "x")) // replaced: counted once
	tests := []struct {
		f    store.InstanceFilter
		want int
	}{
		{store.InstanceFilter{}, 11},
		{store.InstanceFilter{Broker: "b1"}, 6},
		{store.InstanceFilter{Tenant: "x"}, 6},
		{store.InstanceFilter{Tenant: "x{y}"}, 1},
		{store.InstanceFilter{Broker: "b1", Tenant: "y"}, 2},
		{store.InstanceFilter{Broker: "b1", Tenant: "w"}, 0},
		{store.InstanceFilter{Broker: "b9"}, 0},
	}
	for _, tc := range tests {
		if n, err := s.CountInstances(ctx, tc.f); err != nil || n != tc.want {
			t.Errorf("CountInstances(%+v) = %d, %v; want %d", tc.f, n, err, tc.want)
		}
	}
}
