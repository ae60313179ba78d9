package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The contract of the inventory: records, their validation, bindings and
// their instance.

// testInventoryContract lists the inventory's contract tests; Contract
// runs them with the rest.
var testInventoryContract = []struct {
	name string
	fn   func(t *testing.T, b Backend)
}{
	{"InventoryInstance", testInventoryInstance},
	{"InventoryInstanceStamps", testInventoryInstanceStamps},
	{"InventoryKeepsCreated", testInventoryKeepsCreated},
	{"PutInstanceCancelling", testPutInstanceCancelling},
	{"AcquireReading", testAcquireReading},
	{"InventoryBinding", testInventoryBinding},
	{"InventoryDeleteInstance", testInventoryDeleteInstance},
	{"InventoryInvalid", testInventoryInvalid},
	{"InventoryList", testInventoryList},
	{"InventoryListPages", testInventoryListPages},
	{"InventoryTenantMoves", testInventoryTenantMoves},
	{"InventoryCount", testInventoryCount},
	{"InventoryExportImport", testInventoryExportImport},
	{"InventoryImportKeeps", testInventoryImportKeeps},
	{"InventoryConcurrentWriters", testInventoryConcurrentWriters},
	{"InventoryConcurrentTenants", testInventoryConcurrentTenants},
	{"InventoryRestart", testInventoryRestart},
	{"InventoryExpiring", testInventoryExpiring},
	{"InventoryExpiringLimit", testInventoryExpiringLimit},
	{"UsageRecords", testUsageRecords},
	{"UsagePages", testUsagePages},
}

func testInventoryInstance(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	in := Instance("b1", "i1", "cf1")
	if got := MustPutInstance(t, s, in); !cmp.Equal(in, got) {
		t.Errorf("PutInstance returned (-want +got):\n%s", cmp.Diff(in, got))
	}
	got, err := s.GetInstance(ctx, "b1", "i1")
	if d := cmp.Diff(in, got); err != nil || d != "" {
		t.Errorf("GetInstance = %v; diff (-want +got):\n%s", err, d)
	}
	// What Get returned belongs to the caller.
	got.Context[0], got.SealedParameters[0] = 'X', 'X'
	if again, _ := s.GetInstance(ctx, "b1", "i1"); !cmp.Equal(in, again) {
		t.Error("changing what GetInstance returned changed the stored record")
	}
	// Nor does the store keep the caller's slices.
	mine := Instance("b1", "i2", "cf1")
	MustPutInstance(t, s, mine)
	mine.Context[0] = 'X'
	if again, _ := s.GetInstance(ctx, "b1", "i2"); !cmp.Equal(Instance("b1", "i2", "cf1"), again) {
		t.Error("changing a slice after PutInstance changed the stored record")
	}

	// A Put replaces the whole record: fields left empty are gone.
	update := store.Instance{Broker: "b1", InstanceID: "i1", Tenant: "cf1", PlanID: "plan-2",
		LastOperation: store.LastOperation{Kind: store.KindUpdate, State: store.StateInProgress}, Created: in.Created, Updated: T0}
	MustPutInstance(t, s, update)
	got, err = s.GetInstance(ctx, "b1", "i1")
	if d := cmp.Diff(update, got); err != nil || d != "" {
		t.Errorf("GetInstance after a replacing Put = %v; diff (-want +got):\n%s", err, d)
	}

	for _, k := range [][2]string{{"b1", "i3"}, {"b2", "i1"}, {"b", "1/i1"}} {
		_, err := s.GetInstance(ctx, k[0], k[1])
		WantErr(t, "GetInstance of "+k[0]+"/"+k[1], err, store.ErrNotFound)
	}
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	_, err = s.GetInstance(ctx, "b1", "i1")
	WantErr(t, "GetInstance after DeleteInstance", err, store.ErrNotFound)
	_, err = s.DeleteInstance(ctx, "b1", "i1")
	WantErr(t, "second DeleteInstance", err, store.ErrNotFound)
}

// testInventoryInstanceStamps checks the times a Put fills in and the
// normalisation of what it stores.
func testInventoryInstanceStamps(t *testing.T, b Backend) {
	ctx := context.Background()
	c := osbtest.NewClock(T0)
	s := b.Open(t, c.Now)
	local := time.FixedZone("CEST", 2*3600)
	in := store.Instance{Broker: "b1", InstanceID: "i1", Context: json.RawMessage{},
		LastOperation: store.LastOperation{Kind: store.KindProvision, State: store.StateInProgress,
			Started: T0.In(local).Add(1500 * time.Nanosecond)}}
	got := MustPutInstance(t, s, in)
	want := store.Instance{Broker: "b1", InstanceID: "i1", Created: T0, Updated: T0,
		LastOperation: store.LastOperation{Kind: store.KindProvision, State: store.StateInProgress, Started: T0.Add(time.Microsecond)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("PutInstance returned (-want +got):\n%s", d)
	}
	if got, err := s.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetInstance = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	// The oldest and latest storable times survive.
	far := store.Binding{Broker: "b1", InstanceID: "i1", BindingID: "x1",
		ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), RenewBefore: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Advance(time.Hour)
	gotB := MustPutBinding(t, s, far)
	far.Created, far.Updated = T0.Add(time.Hour), T0.Add(time.Hour)
	if d := cmp.Diff(far, gotB); d != "" {
		t.Errorf("PutBinding returned (-want +got):\n%s", d)
	}
	if got, err := s.GetBinding(ctx, "b1", "i1", "x1"); err != nil || !cmp.Equal(far, got) {
		t.Errorf("GetBinding = %v; diff (-want +got):\n%s", err, cmp.Diff(far, got))
	}
}

func testInventoryBinding(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	// A binding needs no recorded instance.
	x1 := MustPutBinding(t, s, Binding("b1", "i1", "x1"))
	if want := Binding("b1", "i1", "x1"); !cmp.Equal(want, x1) {
		t.Errorf("PutBinding returned (-want +got):\n%s", cmp.Diff(want, x1))
	}
	MustPutInstance(t, s, Instance("b1", "i1", "cf1"))
	x2 := MustPutBinding(t, s, Binding("b1", "i1", "x2"))
	x0 := MustPutBinding(t, s, Binding("b1", "i1", "x0"))
	// Neighbours that must not count as i1's bindings.
	MustPutBinding(t, s, Binding("b1", "i10", "x1"))
	MustPutBinding(t, s, Binding("b1", "i", "1"))
	MustPutBinding(t, s, Binding("b2", "i1", "x1"))

	got, err := s.GetBinding(ctx, "b1", "i1", "x1")
	if d := cmp.Diff(x1, got); err != nil || d != "" {
		t.Errorf("GetBinding = %v; diff (-want +got):\n%s", err, d)
	}
	list, err := s.ListBindings(ctx, "b1", "i1")
	if d := cmp.Diff([]store.Binding{x0, x1, x2}, list); err != nil || d != "" {
		t.Errorf("ListBindings = %v; diff (-want +got):\n%s", err, d)
	}
	if list, err := s.ListBindings(ctx, "b1", "i2"); err != nil || len(list) != 0 {
		t.Errorf("ListBindings of an instance without bindings = %v, %v; want none", list, err)
	}

	replaced := x1
	replaced.LastOperation = store.LastOperation{Kind: store.KindUnbind, State: store.StateFailed, Description: "broker said no"}
	replaced.SealedCredentials, replaced.ExpiresAt = nil, time.Time{}
	MustPutBinding(t, s, replaced)
	if got, err := s.GetBinding(ctx, "b1", "i1", "x1"); err != nil || !cmp.Equal(replaced, got) {
		t.Errorf("GetBinding after a replacing Put = %v; diff (-want +got):\n%s", err, cmp.Diff(replaced, got))
	}
	if n, err := s.CountBindings(ctx, "b1"); err != nil || n != 5 {
		t.Errorf("CountBindings(b1) = %d, %v; want 5", n, err)
	}

	WantErr(t, "DeleteBinding", s.DeleteBinding(ctx, "b1", "i1", "x1"), nil)
	WantErr(t, "second DeleteBinding", s.DeleteBinding(ctx, "b1", "i1", "x1"), store.ErrNotFound)
	WantErr(t, "DeleteBinding of another broker's", s.DeleteBinding(ctx, "b3", "i1", "x2"), store.ErrNotFound)
	_, err = s.GetBinding(ctx, "b1", "i1", "x1")
	WantErr(t, "GetBinding after DeleteBinding", err, store.ErrNotFound)
	list, err = s.ListBindings(ctx, "b1", "i1")
	if d := cmp.Diff([]store.Binding{x0, x2}, list); err != nil || d != "" {
		t.Errorf("ListBindings after DeleteBinding = %v; diff (-want +got):\n%s", err, d)
	}
	for broker, want := range map[string]int{"b1": 4, "b2": 1, "b3": 0, "": 5} {
		if n, err := s.CountBindings(ctx, broker); err != nil || n != want {
			t.Errorf("CountBindings(%q) = %d, %v; want %d", broker, n, err, want)
		}
	}
	// Bindings are not instances.
	if n, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil || n != 1 {
		t.Errorf("CountInstances = %d, %v; want 1", n, err)
	}
	_, err = s.GetInstance(ctx, "b1", "i10")
	WantErr(t, "GetInstance of an instance with bindings only", err, store.ErrNotFound)
	if page, _, err := s.ListInstances(ctx, store.InstanceFilter{Broker: "b1"}, "", 10); err != nil ||
		len(page) != 1 || page[0].InstanceID != "i1" {
		t.Errorf("ListInstances(b1) = %v, %v; want i1 alone", page, err)
	}
	// The instance's record goes and comes back; its bindings stay.
	if _, err := s.DeleteInstance(ctx, "b1", "i10"); err != nil {
		t.Fatal(err)
	}
	MustPutInstance(t, s, Instance("b1", "i", "cf1"))
	MustPutInstance(t, s, Instance("b1", "i", "cf2"))
	if list, err := s.ListBindings(ctx, "b1", "i"); err != nil || len(list) != 1 {
		t.Errorf("ListBindings after the instance's record was put twice = %v, %v; want its binding", list, err)
	}
	for tenant, want := range map[string]int{"": 2, "cf1": 1, "cf2": 1} {
		if n, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: tenant}); err != nil || n != want {
			t.Errorf("CountInstances(%q) = %d, %v; want %d", tenant, n, err, want)
		}
	}
}

// testInventoryDeleteInstance checks that deleting an instance takes its
// bindings with it and says which.
func testInventoryDeleteInstance(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	MustPutInstance(t, s, Instance("b1", "i1", "cf1"))
	MustPutInstance(t, s, Instance("b1", "i10", "cf1"))
	x1 := MustPutBinding(t, s, Binding("b1", "i1", "x1"))
	x2 := MustPutBinding(t, s, Binding("b1", "i1", "x2"))
	other := MustPutBinding(t, s, Binding("b1", "i10", "x1"))

	gone, err := s.DeleteInstance(ctx, "b1", "i1")
	if d := cmp.Diff([]store.Binding{x1, x2}, gone); err != nil || d != "" {
		t.Errorf("DeleteInstance = %v; bindings returned (-want +got):\n%s", err, d)
	}
	_, err = s.GetBinding(ctx, "b1", "i1", "x1")
	WantErr(t, "GetBinding of a deleted instance's binding", err, store.ErrNotFound)
	if list, err := s.ListBindings(ctx, "b1", "i1"); err != nil || len(list) != 0 {
		t.Errorf("ListBindings of a deleted instance = %v, %v; want none", list, err)
	}
	if got, err := s.GetBinding(ctx, "b1", "i10", "x1"); err != nil || !cmp.Equal(other, got) {
		t.Errorf("GetBinding of another instance's binding = %+v, %v; want it kept", got, err)
	}
	if n, err := s.CountBindings(ctx, ""); err != nil || n != 1 {
		t.Errorf("CountBindings after DeleteInstance = %d, %v; want 1", n, err)
	}

	// Bindings recorded without their instance go with a DeleteInstance too.
	lone := MustPutBinding(t, s, Binding("b1", "i2", "x1"))
	gone, err = s.DeleteInstance(ctx, "b1", "i2")
	if d := cmp.Diff([]store.Binding{lone}, gone); err != nil || d != "" {
		t.Errorf("DeleteInstance of bindings only = %v; diff (-want +got):\n%s", err, d)
	}
	_, err = s.DeleteInstance(ctx, "b1", "i2")
	WantErr(t, "DeleteInstance of nothing", err, store.ErrNotFound)

	// An instance without bindings.
	if gone, err := s.DeleteInstance(ctx, "b1", "i10"); err != nil || len(gone) != 1 {
		t.Errorf("DeleteInstance(i10) = %v, %v; want its one binding", gone, err)
	}
	if n, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil || n != 0 {
		t.Errorf("CountInstances at the end = %d, %v; want 0", n, err)
	}
}

func testInventoryInvalid(t *testing.T, b Backend) {
	ctx := context.Background()
	s := b.Open(t, osbtest.NewClock(T0).Now)
	year10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	instances := []struct {
		name   string
		change func(in *store.Instance)
	}{
		{"no broker", func(in *store.Instance) { in.Broker = "" }},
		{"no instance id", func(in *store.Instance) { in.InstanceID = "" }},
		{"NUL in broker", func(in *store.Instance) { in.Broker = "b\x001" }},
		{"NUL in instance id", func(in *store.Instance) { in.InstanceID = "i\x001" }},
		{"NUL in tenant", func(in *store.Instance) { in.Tenant = "cf\x001" }},
		{"long broker", func(in *store.Instance) { in.Broker = strings.Repeat("b", store.MaxNameLen+1) }},
		{"long tenant", func(in *store.Instance) { in.Tenant = strings.Repeat("t", store.MaxNameLen+1) }},
		{"long instance id", func(in *store.Instance) { in.InstanceID = strings.Repeat("i", store.MaxIDLen+1) }},
		{"context not JSON", func(in *store.Instance) { in.Context = json.RawMessage(`{"a":`) }},
		{"maintenance_info not JSON", func(in *store.Instance) { in.MaintenanceInfo = json.RawMessage(`x`) }},
		{"metadata not JSON", func(in *store.Instance) { in.Metadata = json.RawMessage(`{}{}`) }},
		{"bind kind", func(in *store.Instance) { in.LastOperation.Kind = store.KindBind }},
		{"unknown state", func(in *store.Instance) { in.LastOperation.State = "done" }},
		{"kind without state", func(in *store.Instance) { in.LastOperation.State = "" }},
		{"state without kind", func(in *store.Instance) { in.LastOperation.Kind = "" }},
		{"long operation", func(in *store.Instance) { in.LastOperation.Operation = strings.Repeat("o", store.MaxOperationLen+1) }},
		{"negative status", func(in *store.Instance) { in.LastOperation.Status = -1 }},
		{"created year 10000", func(in *store.Instance) { in.Created = year10000 }},
		{"ended year 10000", func(in *store.Instance) { in.LastOperation.Ended = year10000 }},
		{"record too large", func(in *store.Instance) { in.SealedParameters = make([]byte, store.MaxRecordLen) }},
	}
	for _, tc := range instances {
		t.Run(tc.name, func(t *testing.T) {
			in := Instance("b1", "i1", "cf1")
			tc.change(&in)
			_, err := s.PutInstance(ctx, in)
			WantErr(t, "PutInstance", err, store.ErrInvalid)
			_, err = s.Import(ctx, []store.Entry{{Instance: &in}}, true)
			WantErr(t, "Import", err, store.ErrInvalid)
		})
	}
	bindings := []struct {
		name   string
		change func(b *store.Binding)
	}{
		{"no binding id", func(b *store.Binding) { b.BindingID = "" }},
		{"NUL in binding id", func(b *store.Binding) { b.BindingID = "x\x00" }},
		{"no instance id", func(b *store.Binding) { b.InstanceID = "" }},
		{"provision kind", func(b *store.Binding) { b.LastOperation.Kind = store.KindProvision }},
		{"bind_resource not JSON", func(b *store.Binding) { b.BindResource = json.RawMessage(`{`) }},
		{"endpoints not JSON", func(b *store.Binding) { b.Endpoints = json.RawMessage(`[`) }},
		{"volume_mounts not JSON", func(b *store.Binding) { b.VolumeMounts = json.RawMessage(`]`) }},
		{"expires_at year 10000", func(b *store.Binding) { b.ExpiresAt = year10000 }},
	}
	for _, tc := range bindings {
		t.Run(tc.name, func(t *testing.T) {
			bd := Binding("b1", "i1", "x1")
			tc.change(&bd)
			_, err := s.PutBinding(ctx, bd)
			WantErr(t, "PutBinding", err, store.ErrInvalid)
		})
	}
	// A released operation's state, unknown, is one (proxy's
	// release_inventory.go), on an instance and on a binding.
	unknown := Instance("b1", "i-unknown", "cf1")
	unknown.LastOperation = store.LastOperation{Kind: store.KindProvision, State: store.StateUnknown, Operation: "op-1", Description: "released by carol"}
	if _, err := s.PutInstance(ctx, unknown); err != nil {
		t.Errorf("PutInstance of a provision of unknown outcome: %v", err)
	} else if got, err := s.GetInstance(ctx, "b1", "i-unknown"); err != nil || got.LastOperation.State != store.StateUnknown {
		t.Errorf("GetInstance of a provision of unknown outcome: %+v, %v", got.LastOperation, err)
	}
	ub := Binding("b1", "i-unknown", "x-unknown")
	ub.LastOperation = store.LastOperation{Kind: store.KindBind, State: store.StateUnknown}
	if _, err := s.PutBinding(ctx, ub); err != nil {
		t.Errorf("PutBinding of a bind of unknown outcome: %v", err)
	}
	if _, err := s.DeleteInstance(ctx, "b1", "i-unknown"); err != nil {
		t.Errorf("DeleteInstance: %v", err)
	}
	keys := map[string]error{}
	_, keys["GetInstance without broker"] = s.GetInstance(ctx, "", "i1")
	_, keys["GetInstance with NUL"] = s.GetInstance(ctx, "b1", "i\x00")
	_, keys["DeleteInstance without id"] = s.DeleteInstance(ctx, "b1", "")
	_, keys["GetBinding without binding id"] = s.GetBinding(ctx, "b1", "i1", "")
	keys["DeleteBinding without broker"] = s.DeleteBinding(ctx, "", "i1", "x1")
	_, keys["ListBindings without instance id"] = s.ListBindings(ctx, "b1", "")
	_, _, keys["ListInstances with a bad cursor"] = s.ListInstances(ctx, store.InstanceFilter{}, "not a cursor!", 10)
	_, _, keys["ListInstances with a cursor of 3 parts"] = s.ListInstances(ctx, store.InstanceFilter{},
		store.EncodeCursor("b1", "i1\x00x"), 10)
	_, _, keys["ListInstances with a NUL tenant"] = s.ListInstances(ctx, store.InstanceFilter{Tenant: "\x00"}, "", 10)
	_, keys["CountInstances with a NUL broker"] = s.CountInstances(ctx, store.InstanceFilter{Broker: "a\x00b"})
	_, keys["CountBindings with a NUL broker"] = s.CountBindings(ctx, "a\x00b")
	_, keys["Import of an empty entry"] = s.Import(ctx, []store.Entry{{}}, true)
	_, keys["Import of a double entry"] = s.Import(ctx, []store.Entry{{Instance: &store.Instance{Broker: "b", InstanceID: "i"},
		Binding: &store.Binding{Broker: "b", InstanceID: "i", BindingID: "x"}}}, true)
	for name, err := range keys {
		WantErr(t, name, err, store.ErrInvalid)
	}

	// An invalid entry anywhere in an import writes nothing.
	good, bad := Instance("b1", "i1", "cf1"), Instance("b1", "i2", "cf1")
	bad.Context = json.RawMessage("{")
	_, err := s.Import(ctx, []store.Entry{{Instance: &good}, {Instance: &bad}}, true)
	if !errors.Is(err, store.ErrInvalid) || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("Import with a bad second entry: %v, want ErrInvalid naming entry 1", err)
	}
	if n, err := s.CountInstances(ctx, store.InstanceFilter{}); err != nil || n != 0 {
		t.Errorf("CountInstances after invalid calls = %d, %v; want 0", n, err)
	}
	if n, err := s.CountBindings(ctx, ""); err != nil || n != 0 {
		t.Errorf("CountBindings after invalid calls = %d, %v; want 0", n, err)
	}
}
