package store

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// The contract of the inventory: records, their validation, bindings and
// their instance.

// testInventoryContract lists the inventory's contract tests; testContract
// runs them with the rest.
var testInventoryContract = []struct {
	name string
	fn   func(t *testing.T, b backend)
}{
	{"InventoryInstance", testInventoryInstance},
	{"InventoryInstanceStamps", testInventoryInstanceStamps},
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
}

// testInstance is an instance of broker with every field set, as a Cloud
// Controller provision leaves it.
func testInstance(broker, id, tenant string) Instance {
	return Instance{
		Broker: broker, InstanceID: id, Tenant: tenant,
		ServiceID: "svc-1", PlanID: "plan-1",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1",` +
			`"instance_name":"db ` + id + `"}`),
		OrganizationGUID: "org-1", SpaceGUID: "space-1",
		DashboardURL:     "https://dashboard.example.com/" + id,
		MaintenanceInfo:  json.RawMessage(`{"version":"1.2.3"}`),
		Metadata:         json.RawMessage(`{"labels":{"tier":"gold"}}`),
		SealedParameters: []byte{1, 0, 0xff, 'x'},
		LastOperation: LastOperation{
			Kind: KindProvision, State: StateSucceeded, Description: "created", Operation: "task-1",
			Status: 200, Started: t0.Add(-time.Minute), Ended: t0.Add(-time.Second),
		},
		Created: t0.Add(-time.Hour), Updated: t0.Add(-time.Second),
	}
}

// testBinding is a binding of instance id of broker with every field set.
func testBinding(broker, id, binding string) Binding {
	return Binding{
		Broker: broker, InstanceID: id, BindingID: binding, Tenant: "cf1",
		ServiceID: "svc-1", PlanID: "plan-1", AppGUID: "app-" + binding,
		BindResource:   json.RawMessage(`{"app_guid":"app-` + binding + `"}`),
		SyslogDrainURL: "syslog://logs.example.com", RouteServiceURL: "https://route.example.com",
		VolumeMounts:     json.RawMessage(`[{"driver":"nfs"}]`),
		Endpoints:        json.RawMessage(`[{"host":"db.example.com","ports":["5432"]}]`),
		SealedParameters: []byte("sealed-params"), SealedCredentials: []byte("sealed-creds\x00"),
		ExpiresAt: t0.Add(30 * 24 * time.Hour), RenewBefore: t0.Add(23 * 24 * time.Hour),
		LastOperation: LastOperation{Kind: KindBind, State: StateSucceeded, Status: 201, Started: t0, Ended: t0},
		Created:       t0, Updated: t0,
	}
}

func mustPutInstance(t *testing.T, s Store, in Instance) Instance {
	t.Helper()
	got, err := s.PutInstance(context.Background(), in)
	if err != nil {
		t.Fatalf("PutInstance(%s/%s): %v", in.Broker, in.InstanceID, err)
	}
	return got
}

func mustPutBinding(t *testing.T, s Store, b Binding) Binding {
	t.Helper()
	got, err := s.PutBinding(context.Background(), b)
	if err != nil {
		t.Fatalf("PutBinding(%s/%s/%s): %v", b.Broker, b.InstanceID, b.BindingID, err)
	}
	return got
}

func testInventoryInstance(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	in := testInstance("b1", "i1", "cf1")
	if got := mustPutInstance(t, s, in); !cmp.Equal(in, got) {
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
	mine := testInstance("b1", "i2", "cf1")
	mustPutInstance(t, s, mine)
	mine.Context[0] = 'X'
	if again, _ := s.GetInstance(ctx, "b1", "i2"); !cmp.Equal(testInstance("b1", "i2", "cf1"), again) {
		t.Error("changing a slice after PutInstance changed the stored record")
	}

	// A Put replaces the whole record: fields left empty are gone.
	update := Instance{Broker: "b1", InstanceID: "i1", Tenant: "cf1", PlanID: "plan-2",
		LastOperation: LastOperation{Kind: KindUpdate, State: StateInProgress}, Created: in.Created, Updated: t0}
	mustPutInstance(t, s, update)
	got, err = s.GetInstance(ctx, "b1", "i1")
	if d := cmp.Diff(update, got); err != nil || d != "" {
		t.Errorf("GetInstance after a replacing Put = %v; diff (-want +got):\n%s", err, d)
	}

	for _, k := range [][2]string{{"b1", "i3"}, {"b2", "i1"}, {"b", "1/i1"}} {
		_, err := s.GetInstance(ctx, k[0], k[1])
		wantErr(t, "GetInstance of "+k[0]+"/"+k[1], err, ErrNotFound)
	}
	if _, err := s.DeleteInstance(ctx, "b1", "i1"); err != nil {
		t.Fatalf("DeleteInstance: %v", err)
	}
	_, err = s.GetInstance(ctx, "b1", "i1")
	wantErr(t, "GetInstance after DeleteInstance", err, ErrNotFound)
	_, err = s.DeleteInstance(ctx, "b1", "i1")
	wantErr(t, "second DeleteInstance", err, ErrNotFound)
}

// testInventoryInstanceStamps checks the times a Put fills in and the
// normalisation of what it stores.
func testInventoryInstanceStamps(t *testing.T, b backend) {
	ctx := context.Background()
	c := osbtest.NewClock(t0)
	s := b.open(t, c.Now)
	local := time.FixedZone("CEST", 2*3600)
	in := Instance{Broker: "b1", InstanceID: "i1", Context: json.RawMessage{},
		LastOperation: LastOperation{Kind: KindProvision, State: StateInProgress,
			Started: t0.In(local).Add(1500 * time.Nanosecond)}}
	got := mustPutInstance(t, s, in)
	want := Instance{Broker: "b1", InstanceID: "i1", Created: t0, Updated: t0,
		LastOperation: LastOperation{Kind: KindProvision, State: StateInProgress, Started: t0.Add(time.Microsecond)}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("PutInstance returned (-want +got):\n%s", d)
	}
	if got, err := s.GetInstance(ctx, "b1", "i1"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetInstance = %v; diff (-want +got):\n%s", err, cmp.Diff(want, got))
	}
	// The oldest and latest storable times survive.
	far := Binding{Broker: "b1", InstanceID: "i1", BindingID: "x1",
		ExpiresAt: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), RenewBefore: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)}
	c.Advance(time.Hour)
	gotB := mustPutBinding(t, s, far)
	far.Created, far.Updated = t0.Add(time.Hour), t0.Add(time.Hour)
	if d := cmp.Diff(far, gotB); d != "" {
		t.Errorf("PutBinding returned (-want +got):\n%s", d)
	}
	if got, err := s.GetBinding(ctx, "b1", "i1", "x1"); err != nil || !cmp.Equal(far, got) {
		t.Errorf("GetBinding = %v; diff (-want +got):\n%s", err, cmp.Diff(far, got))
	}
}

func testInventoryBinding(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	// A binding needs no recorded instance.
	x1 := mustPutBinding(t, s, testBinding("b1", "i1", "x1"))
	if want := testBinding("b1", "i1", "x1"); !cmp.Equal(want, x1) {
		t.Errorf("PutBinding returned (-want +got):\n%s", cmp.Diff(want, x1))
	}
	mustPutInstance(t, s, testInstance("b1", "i1", "cf1"))
	x2 := mustPutBinding(t, s, testBinding("b1", "i1", "x2"))
	x0 := mustPutBinding(t, s, testBinding("b1", "i1", "x0"))
	// Neighbours that must not count as i1's bindings.
	mustPutBinding(t, s, testBinding("b1", "i10", "x1"))
	mustPutBinding(t, s, testBinding("b1", "i", "1"))
	mustPutBinding(t, s, testBinding("b2", "i1", "x1"))

	got, err := s.GetBinding(ctx, "b1", "i1", "x1")
	if d := cmp.Diff(x1, got); err != nil || d != "" {
		t.Errorf("GetBinding = %v; diff (-want +got):\n%s", err, d)
	}
	list, err := s.ListBindings(ctx, "b1", "i1")
	if d := cmp.Diff([]Binding{x0, x1, x2}, list); err != nil || d != "" {
		t.Errorf("ListBindings = %v; diff (-want +got):\n%s", err, d)
	}
	if list, err := s.ListBindings(ctx, "b1", "i2"); err != nil || len(list) != 0 {
		t.Errorf("ListBindings of an instance without bindings = %v, %v; want none", list, err)
	}

	replaced := x1
	replaced.LastOperation = LastOperation{Kind: KindUnbind, State: StateFailed, Description: "broker said no"}
	replaced.SealedCredentials, replaced.ExpiresAt = nil, time.Time{}
	mustPutBinding(t, s, replaced)
	if got, err := s.GetBinding(ctx, "b1", "i1", "x1"); err != nil || !cmp.Equal(replaced, got) {
		t.Errorf("GetBinding after a replacing Put = %v; diff (-want +got):\n%s", err, cmp.Diff(replaced, got))
	}
	if n, err := s.CountBindings(ctx, "b1"); err != nil || n != 5 {
		t.Errorf("CountBindings(b1) = %d, %v; want 5", n, err)
	}

	wantErr(t, "DeleteBinding", s.DeleteBinding(ctx, "b1", "i1", "x1"), nil)
	wantErr(t, "second DeleteBinding", s.DeleteBinding(ctx, "b1", "i1", "x1"), ErrNotFound)
	wantErr(t, "DeleteBinding of another broker's", s.DeleteBinding(ctx, "b3", "i1", "x2"), ErrNotFound)
	_, err = s.GetBinding(ctx, "b1", "i1", "x1")
	wantErr(t, "GetBinding after DeleteBinding", err, ErrNotFound)
	list, err = s.ListBindings(ctx, "b1", "i1")
	if d := cmp.Diff([]Binding{x0, x2}, list); err != nil || d != "" {
		t.Errorf("ListBindings after DeleteBinding = %v; diff (-want +got):\n%s", err, d)
	}
	for broker, want := range map[string]int{"b1": 4, "b2": 1, "b3": 0, "": 5} {
		if n, err := s.CountBindings(ctx, broker); err != nil || n != want {
			t.Errorf("CountBindings(%q) = %d, %v; want %d", broker, n, err, want)
		}
	}
	// Bindings are not instances.
	if n, err := s.CountInstances(ctx, InstanceFilter{}); err != nil || n != 1 {
		t.Errorf("CountInstances = %d, %v; want 1", n, err)
	}
	_, err = s.GetInstance(ctx, "b1", "i10")
	wantErr(t, "GetInstance of an instance with bindings only", err, ErrNotFound)
	if page, _, err := s.ListInstances(ctx, InstanceFilter{Broker: "b1"}, "", 10); err != nil ||
		len(page) != 1 || page[0].InstanceID != "i1" {
		t.Errorf("ListInstances(b1) = %v, %v; want i1 alone", page, err)
	}
	// The instance's record goes and comes back; its bindings stay.
	if _, err := s.DeleteInstance(ctx, "b1", "i10"); err != nil {
		t.Fatal(err)
	}
	mustPutInstance(t, s, testInstance("b1", "i", "cf1"))
	mustPutInstance(t, s, testInstance("b1", "i", "cf2"))
	if list, err := s.ListBindings(ctx, "b1", "i"); err != nil || len(list) != 1 {
		t.Errorf("ListBindings after the instance's record was put twice = %v, %v; want its binding", list, err)
	}
	for tenant, want := range map[string]int{"": 2, "cf1": 1, "cf2": 1} {
		if n, err := s.CountInstances(ctx, InstanceFilter{Tenant: tenant}); err != nil || n != want {
			t.Errorf("CountInstances(%q) = %d, %v; want %d", tenant, n, err, want)
		}
	}
}

// testInventoryDeleteInstance checks that deleting an instance takes its
// bindings with it and says which.
func testInventoryDeleteInstance(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	mustPutInstance(t, s, testInstance("b1", "i1", "cf1"))
	mustPutInstance(t, s, testInstance("b1", "i10", "cf1"))
	x1 := mustPutBinding(t, s, testBinding("b1", "i1", "x1"))
	x2 := mustPutBinding(t, s, testBinding("b1", "i1", "x2"))
	other := mustPutBinding(t, s, testBinding("b1", "i10", "x1"))

	gone, err := s.DeleteInstance(ctx, "b1", "i1")
	if d := cmp.Diff([]Binding{x1, x2}, gone); err != nil || d != "" {
		t.Errorf("DeleteInstance = %v; bindings returned (-want +got):\n%s", err, d)
	}
	_, err = s.GetBinding(ctx, "b1", "i1", "x1")
	wantErr(t, "GetBinding of a deleted instance's binding", err, ErrNotFound)
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
	lone := mustPutBinding(t, s, testBinding("b1", "i2", "x1"))
	gone, err = s.DeleteInstance(ctx, "b1", "i2")
	if d := cmp.Diff([]Binding{lone}, gone); err != nil || d != "" {
		t.Errorf("DeleteInstance of bindings only = %v; diff (-want +got):\n%s", err, d)
	}
	_, err = s.DeleteInstance(ctx, "b1", "i2")
	wantErr(t, "DeleteInstance of nothing", err, ErrNotFound)

	// An instance without bindings.
	if gone, err := s.DeleteInstance(ctx, "b1", "i10"); err != nil || len(gone) != 1 {
		t.Errorf("DeleteInstance(i10) = %v, %v; want its one binding", gone, err)
	}
	if n, err := s.CountInstances(ctx, InstanceFilter{}); err != nil || n != 0 {
		t.Errorf("CountInstances at the end = %d, %v; want 0", n, err)
	}
}

func testInventoryInvalid(t *testing.T, b backend) {
	ctx := context.Background()
	s := b.open(t, osbtest.NewClock(t0).Now)
	year10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	instances := []struct {
		name   string
		change func(in *Instance)
	}{
		{"no broker", func(in *Instance) { in.Broker = "" }},
		{"no instance id", func(in *Instance) { in.InstanceID = "" }},
		{"NUL in broker", func(in *Instance) { in.Broker = "b\x001" }},
		{"NUL in instance id", func(in *Instance) { in.InstanceID = "i\x001" }},
		{"NUL in tenant", func(in *Instance) { in.Tenant = "cf\x001" }},
		{"long broker", func(in *Instance) { in.Broker = strings.Repeat("b", MaxNameLen+1) }},
		{"long tenant", func(in *Instance) { in.Tenant = strings.Repeat("t", MaxNameLen+1) }},
		{"long instance id", func(in *Instance) { in.InstanceID = strings.Repeat("i", MaxIDLen+1) }},
		{"context not JSON", func(in *Instance) { in.Context = json.RawMessage(`{"a":`) }},
		{"maintenance_info not JSON", func(in *Instance) { in.MaintenanceInfo = json.RawMessage(`x`) }},
		{"metadata not JSON", func(in *Instance) { in.Metadata = json.RawMessage(`{}{}`) }},
		{"bind kind", func(in *Instance) { in.LastOperation.Kind = KindBind }},
		{"unknown state", func(in *Instance) { in.LastOperation.State = "done" }},
		{"kind without state", func(in *Instance) { in.LastOperation.State = "" }},
		{"state without kind", func(in *Instance) { in.LastOperation.Kind = "" }},
		{"long operation", func(in *Instance) { in.LastOperation.Operation = strings.Repeat("o", MaxOperationLen+1) }},
		{"negative status", func(in *Instance) { in.LastOperation.Status = -1 }},
		{"created year 10000", func(in *Instance) { in.Created = year10000 }},
		{"ended year 10000", func(in *Instance) { in.LastOperation.Ended = year10000 }},
		{"record too large", func(in *Instance) { in.SealedParameters = make([]byte, MaxRecordLen) }},
	}
	for _, tc := range instances {
		t.Run(tc.name, func(t *testing.T) {
			in := testInstance("b1", "i1", "cf1")
			tc.change(&in)
			_, err := s.PutInstance(ctx, in)
			wantErr(t, "PutInstance", err, ErrInvalid)
			_, err = s.Import(ctx, []Entry{{Instance: &in}}, true)
			wantErr(t, "Import", err, ErrInvalid)
		})
	}
	bindings := []struct {
		name   string
		change func(b *Binding)
	}{
		{"no binding id", func(b *Binding) { b.BindingID = "" }},
		{"NUL in binding id", func(b *Binding) { b.BindingID = "x\x00" }},
		{"no instance id", func(b *Binding) { b.InstanceID = "" }},
		{"provision kind", func(b *Binding) { b.LastOperation.Kind = KindProvision }},
		{"bind_resource not JSON", func(b *Binding) { b.BindResource = json.RawMessage(`{`) }},
		{"endpoints not JSON", func(b *Binding) { b.Endpoints = json.RawMessage(`[`) }},
		{"volume_mounts not JSON", func(b *Binding) { b.VolumeMounts = json.RawMessage(`]`) }},
		{"expires_at year 10000", func(b *Binding) { b.ExpiresAt = year10000 }},
	}
	for _, tc := range bindings {
		t.Run(tc.name, func(t *testing.T) {
			bd := testBinding("b1", "i1", "x1")
			tc.change(&bd)
			_, err := s.PutBinding(ctx, bd)
			wantErr(t, "PutBinding", err, ErrInvalid)
		})
	}
	keys := map[string]error{}
	_, keys["GetInstance without broker"] = s.GetInstance(ctx, "", "i1")
	_, keys["GetInstance with NUL"] = s.GetInstance(ctx, "b1", "i\x00")
	_, keys["DeleteInstance without id"] = s.DeleteInstance(ctx, "b1", "")
	_, keys["GetBinding without binding id"] = s.GetBinding(ctx, "b1", "i1", "")
	keys["DeleteBinding without broker"] = s.DeleteBinding(ctx, "", "i1", "x1")
	_, keys["ListBindings without instance id"] = s.ListBindings(ctx, "b1", "")
	_, _, keys["ListInstances with a bad cursor"] = s.ListInstances(ctx, InstanceFilter{}, "not a cursor!", 10)
	_, _, keys["ListInstances with a cursor of 3 parts"] = s.ListInstances(ctx, InstanceFilter{},
		EncodeCursor("b1", "i1\x00x"), 10)
	_, _, keys["ListInstances with a NUL tenant"] = s.ListInstances(ctx, InstanceFilter{Tenant: "\x00"}, "", 10)
	_, keys["CountInstances with a NUL broker"] = s.CountInstances(ctx, InstanceFilter{Broker: "a\x00b"})
	_, keys["CountBindings with a NUL broker"] = s.CountBindings(ctx, "a\x00b")
	_, keys["Import of an empty entry"] = s.Import(ctx, []Entry{{}}, true)
	_, keys["Import of a double entry"] = s.Import(ctx, []Entry{{Instance: &Instance{Broker: "b", InstanceID: "i"},
		Binding: &Binding{Broker: "b", InstanceID: "i", BindingID: "x"}}}, true)
	for name, err := range keys {
		wantErr(t, name, err, ErrInvalid)
	}

	// An invalid entry anywhere in an import writes nothing.
	good, bad := testInstance("b1", "i1", "cf1"), testInstance("b1", "i2", "cf1")
	bad.Context = json.RawMessage("{")
	_, err := s.Import(ctx, []Entry{{Instance: &good}, {Instance: &bad}}, true)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "entry 1") {
		t.Errorf("Import with a bad second entry: %v, want ErrInvalid naming entry 1", err)
	}
	if n, err := s.CountInstances(ctx, InstanceFilter{}); err != nil || n != 0 {
		t.Errorf("CountInstances after invalid calls = %d, %v; want 0", n, err)
	}
	if n, err := s.CountBindings(ctx, ""); err != nil || n != 0 {
		t.Errorf("CountBindings after invalid calls = %d, %v; want 0", n, err)
	}
}
