package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of export and import, concurrent writers and restarts.

// ExportAll collects what s.Export yields.
func ExportAll(t *testing.T, s store.Store) []store.Entry {
	t.Helper()
	var out []store.Entry
	for e, err := range s.Export(context.Background()) {
		if err != nil {
			t.Fatalf("Export: %v", err)
		}
		out = append(out, e)
	}
	return out
}

// entryName is "broker/instance" or "broker/instance/binding".
func entryName(e store.Entry) string {
	if e.Instance != nil {
		return e.Instance.Broker + "/" + e.Instance.InstanceID
	}
	return e.Binding.Broker + "/" + e.Binding.InstanceID + "/" + e.Binding.BindingID
}

func testInventoryExportImport(t *testing.T, b Backend) {
	ctx := context.Background()
	src := b.Open(t, osbtest.NewClock(T0).Now)
	ListFixture(t, src)
	want := []string{"b/i1", "b%7B/i1", "b1/a*[?]", "b1/i1", "b1/i1-a", "b1/i10", "b1/i2", "b1/z",
		"b1x/i1", "{b}/i1", "}b{/i1"}
	// More bindings than one export page, over brokers, of instances
	// recorded and not.
	var bindings []string
	for _, p := range []struct{ broker, id string }{{"b", "i1"}, {"b1", "i1"}, {"b1", "i1-a"}, {"b1", "i9"}, {"}b{", "i1"}} {
		for i := range 260 {
			bd := Binding(p.broker, p.id, fmt.Sprintf("x%03d", i))
			bindings = append(bindings, entryName(store.Entry{Binding: &bd}))
			MustPutBinding(t, src, bd)
		}
	}
	want = append(want, bindings...)

	got := ExportAll(t, src)
	var gotNames []string
	for _, e := range got {
		gotNames = append(gotNames, entryName(e))
	}
	if d := cmp.Diff(want, gotNames); d != "" {
		t.Fatalf("Export order (-want +got):\n%s", d)
	}
	if in, err := src.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(in, *got[3].Instance) {
		t.Errorf("exported record differs from GetInstance: %v\n%s", err, cmp.Diff(in, *got[3].Instance))
	}

	// Stopping early stops the export.
	n := 0
	for range src.Export(ctx) {
		if n++; n == 3 {
			break
		}
	}

	dst := b.Open(t, osbtest.NewClock(T0).Now)
	for start := 0; start < len(got); start += 400 {
		res, err := dst.Import(ctx, got[start:min(start+400, len(got))], false)
		if err != nil {
			t.Fatalf("Import: %v", err)
		}
		if res.Written != min(400, len(got)-start) || res.Skipped != 0 {
			t.Errorf("Import of a batch = %+v", res)
		}
	}
	if d := cmp.Diff(got, ExportAll(t, dst)); d != "" {
		t.Errorf("export of the imported store (-source +imported):\n%s", d)
	}
	for broker, want := range map[string]int{"b1": 780, "": 1300} {
		if n, err := dst.CountBindings(ctx, broker); err != nil || n != want {
			t.Errorf("CountBindings(%q) after Import = %d, %v; want %d", broker, n, err, want)
		}
	}
	if n, err := dst.CountInstances(ctx, store.InstanceFilter{Tenant: "x"}); err != nil || n != 6 {
		t.Errorf("CountInstances(tenant x) after Import = %d, %v; want 6", n, err)
	}
	if res, err := dst.Import(ctx, nil, true); err != nil || res != (store.ImportResult{}) {
		t.Errorf("Import of nothing = %+v, %v", res, err)
	}
}

// testInventoryImportKeeps imports over records the store has: kept
// without replace, replaced with it.
func testInventoryImportKeeps(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	mine := MustPutInstance(t, s, Instance("b1", "i1", "x"))
	mineB := MustPutBinding(t, s, Binding("b1", "i1", "x1"))

	theirs := store.Instance{Broker: "b1", InstanceID: "i1", Tenant: "y", PlanID: "imported"}
	fresh := store.Instance{Broker: "b1", InstanceID: "i2", Tenant: "y"}
	theirsB := store.Binding{Broker: "b1", InstanceID: "i1", BindingID: "x1", AppGUID: "imported"}
	entries := []store.Entry{{Instance: &theirs}, {Instance: &fresh}, {Binding: &theirsB}}
	res, err := s.Import(ctx, entries, false)
	if err != nil || res != (store.ImportResult{Written: 1, Skipped: 2}) {
		t.Errorf("Import without replace = %+v, %v; want 1 written, 2 skipped", res, err)
	}
	if got, _ := s.GetInstance(ctx, "b1", "i1"); !cmp.Equal(mine, got) {
		t.Errorf("Import without replace changed a recorded instance:\n%s", cmp.Diff(mine, got))
	}
	if got, _ := s.GetBinding(ctx, "b1", "i1", "x1"); !cmp.Equal(mineB, got) {
		t.Errorf("Import without replace changed a recorded binding:\n%s", cmp.Diff(mineB, got))
	}
	got, err := s.GetInstance(ctx, "b1", "i2")
	if want := (store.Instance{Broker: "b1", InstanceID: "i2", Tenant: "y", Created: T0, Updated: T0}); err != nil || !cmp.Equal(want, got) {
		t.Errorf("imported instance = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}

	res, err = s.Import(ctx, entries, true)
	if err != nil || res != (store.ImportResult{Written: 3}) {
		t.Errorf("Import with replace = %+v, %v; want 3 written", res, err)
	}
	if got, _ := s.GetInstance(ctx, "b1", "i1"); got.PlanID != "imported" || got.Tenant != "y" {
		t.Errorf("Import with replace left %+v", got)
	}
	if got, _ := s.GetBinding(ctx, "b1", "i1", "x1"); got.AppGUID != "imported" {
		t.Errorf("Import with replace left binding %+v", got)
	}
	for tenant, want := range map[string]int{"x": 0, "y": 2} {
		if n, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: tenant}); err != nil || n != want {
			t.Errorf("CountInstances(tenant %s) = %d, %v; want %d", tenant, n, err, want)
		}
	}
}

// testInventoryConcurrentWriters runs writers of distinct instances and
// their bindings, deleting some, beside readers: counts, listings and
// records agree at the end.
func testInventoryConcurrentWriters(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	const writers, each = 8, 40
	var wg sync.WaitGroup
	errs := make(chan error, writers*each*4)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%d-i%02d", w, i)
				in := Instance(fmt.Sprint("b", w%2), id, fmt.Sprint("t", i%3))
				if _, err := s.PutInstance(ctx, in); err != nil {
					errs <- err
				}
				for _, x := range []string{"x1", "x2"} {
					if _, err := s.PutBinding(ctx, Binding(in.Broker, id, x)); err != nil {
						errs <- err
					}
				}
				if i%5 == 0 {
					if gone, err := s.DeleteInstance(ctx, in.Broker, id); err != nil || len(gone) != 2 {
						errs <- fmt.Errorf("DeleteInstance(%s) = %d bindings, %v", id, len(gone), err)
					}
				}
			}
		})
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, _, err := s.ListInstances(ctx, store.InstanceFilter{Tenant: "t1"}, "", 50); err != nil {
					errs <- err
				}
				if _, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	kept := writers * (each - each/5)
	all, _ := listAll(t, s, store.InstanceFilter{}, 100)
	if len(all) != kept {
		t.Errorf("listed %d instances, want %d", len(all), kept)
	}
	if n, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil || n != kept {
		t.Errorf("CountInstances = %d, %v; want %d", n, err, kept)
	}
	if n, err := s.CountBindings(ctx, ""); err != nil || n != 2*kept {
		t.Errorf("CountBindings = %d, %v; want %d", n, err, 2*kept)
	}
	sum := 0
	for tenant := range 3 {
		f := store.InstanceFilter{Tenant: fmt.Sprint("t", tenant)}
		list, _ := listAll(t, s, f, 100)
		n, err := s.CountInstances(ctx, f)
		if err != nil || n != len(list) {
			t.Errorf("CountInstances(%+v) = %d, %v; listed %d", f, n, err, len(list))
		}
		sum += n
	}
	if sum != kept {
		t.Errorf("tenants count %d instances in all, want %d", sum, kept)
	}
	for _, in := range all {
		if list, err := s.ListBindings(ctx, in.Broker, in.InstanceID); err != nil || len(list) != 2 {
			t.Errorf("ListBindings(%s) = %d, %v; want 2", in.InstanceID, len(list), err)
		}
	}
}

// testInventoryConcurrentTenants has writers race to put one instance
// under different tenants: whichever wins, the instance is listed and
// counted under its tenant only.
func testInventoryConcurrentTenants(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	const writers = 16
	start := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range 10 {
				if _, err := s.PutInstance(ctx, Instance("b1", "i1", fmt.Sprint("t", (w+i)%4))); err != nil {
					t.Error(err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	in, err := s.GetInstance(ctx, "b1", "i1")
	if err != nil {
		t.Fatal(err)
	}
	for tenant := range 4 {
		f := store.InstanceFilter{Broker: "b1", Tenant: fmt.Sprint("t", tenant)}
		list, _ := listAll(t, s, f, 10)
		n, err := s.CountInstances(ctx, f)
		want := 0
		if f.Tenant == in.Tenant {
			want = 1
		}
		if len(list) != want || n != want || err != nil {
			t.Errorf("tenant %s (the record says %s): listed %d, counted %d (%v); want %d",
				f.Tenant, in.Tenant, len(list), n, err, want)
		}
	}
}

func testInventoryRestart(t *testing.T, b Backend) {
	if b.Reopen == nil {
		t.Skip("nothing persists")
	}
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	ListFixture(t, s)
	MustPutBinding(t, s, Binding("b1", "i1", "x1"))
	MustPutBinding(t, s, Binding("}b{", "i1", "x1"))
	before := ExportAll(t, s)

	s = b.Reopen(t, s, c.Now)
	if d := cmp.Diff(before, ExportAll(t, s)); d != "" {
		t.Errorf("export after restart (-before +after):\n%s", d)
	}
	if n, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: "x"}); err != nil || n != 6 {
		t.Errorf("CountInstances(tenant x) after restart = %d, %v; want 6", n, err)
	}
	if n, err := s.CountBindings(ctx, ""); err != nil || n != 2 {
		t.Errorf("CountBindings after restart = %d, %v; want 2", n, err)
	}
	c.Advance(time.Hour)
	gone, err := s.DeleteInstance(ctx, "b1", "i1")
	if err != nil || len(gone) != 1 {
		t.Errorf("DeleteInstance after restart = %v, %v; want its binding", gone, err)
	}
}
