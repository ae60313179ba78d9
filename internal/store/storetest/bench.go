package storetest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Inventory benchmarks:
//
//	go test -p 1 ./internal/store/... -run '^$' -bench 'Inventory' -benchtime 1x
//
// The footprint ones fill -inventory.n instances once (default 100,000;
// -inventory.n 1000000 checks the budget of 1 GB per million directly),
// each with -inventory.bindings bindings (default 1), and report bytes per
// instance and per 10,000 instances (with their bindings) and the
// projection to a million. The -inventory flags below exist in the test
// binaries that import storetest (the backends' and storetest's own):
// name those packages when passing them.

// InventoryN is how many instances the footprint benchmarks fill.
var InventoryN = flag.Int("inventory.n", 100_000, "instances the inventory footprint benchmarks fill")

// inventoryBindings is how many bindings each instance has.
var inventoryBindings = flag.Int("inventory.bindings", 1, "bindings of each instance the inventory footprint benchmarks fill")

// inventorySecrets makes the footprint benchmarks keep sealed parameters
// too (113 bytes: 80 of JSON sealed), and sealed credentials on the
// bindings (145 bytes: 112 of JSON sealed).
var inventorySecrets = flag.Bool("inventory.secrets", false, "inventory footprint benchmarks store sealed parameters")

// BenchInstance is an instance as Cloud Controller provisions it through
// the gateway: GUIDs, the 2.15 context with names and empty annotations, a
// dashboard URL, maintenance_info, an asynchronous provision's last
// operation.
func BenchInstance() store.Instance {
	id, org, space := GUID(), GUID(), GUID()
	now := time.Now()
	in := store.Instance{
		Broker: "mysql-broker", InstanceID: id, Tenant: "cf-prod-eu",
		ServiceID: "3f0e5e2c-1c9a-4d57-8a3e-7f2b9c1d4e60", PlanID: "9d3c2b1a-8e7f-4a6b-9c5d-2e1f0a3b4c5d",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"` + org +
			`","organization_name":"acme-payments","space_guid":"` + space + `","space_name":"production",` +
			`"instance_name":"orders-db-` + id[:8] + `","organization_annotations":{},"space_annotations":{},"instance_annotations":{}}`),
		OrganizationGUID: org, SpaceGUID: space,
		DashboardURL:    "https://mysql.example.com/dashboard/instances/" + id,
		MaintenanceInfo: json.RawMessage(`{"version":"8.0.36"}`),
		LastOperation: store.LastOperation{
			Kind: store.KindProvision, State: store.StateSucceeded, Description: "provisioned",
			Operation: "provision-" + GUID(), Status: 200, Started: now.Add(-time.Minute), Ended: now,
		},
		Created: now.Add(-time.Minute), Updated: now,
	}
	if *inventorySecrets { // ciphertext: random, it does not deflate
		in.SealedParameters = make([]byte, 80+33)
		rand.Read(in.SealedParameters)
	}
	return in
}

// benchBinding is a binding of in as Cloud Controller makes it through the
// gateway: an app GUID and bind_resource, an expires_at (so it is in the
// expiry index too), a synchronous bind's last operation.
func benchBinding(in store.Instance) store.Binding {
	app, now := GUID(), time.Now()
	bd := store.Binding{
		Broker: in.Broker, InstanceID: in.InstanceID, BindingID: GUID(), Tenant: in.Tenant,
		ServiceID: in.ServiceID, PlanID: in.PlanID, AppGUID: app,
		BindResource: json.RawMessage(`{"app_guid":"` + app + `","space_guid":"` + in.SpaceGUID + `"}`),
		ExpiresAt:    now.Add(90 * 24 * time.Hour), RenewBefore: now.Add(60 * 24 * time.Hour),
		LastOperation: store.LastOperation{Kind: store.KindBind, State: store.StateSucceeded, Status: 201, Started: now, Ended: now},
		Created:       now, Updated: now,
	}
	if *inventorySecrets {
		bd.SealedCredentials = make([]byte, 112+33)
		rand.Read(bd.SealedCredentials)
	}
	return bd
}

// inventoryLater makes FillInventory put every instance first and their
// bindings after, as a platform whose apps bind long after the provision
// does (by default each instance's bindings follow it at once).
var inventoryLater = flag.Bool("inventory.later", false, "inventory footprint benchmarks put the bindings after all the instances")

// inventoryWriters is how many goroutines FillInventory puts from: with
// one, every put is a commit of its own, as at a gateway with one
// operation at a time; with many, the bolt backend's commits take several.
var inventoryWriters = flag.Int("inventory.writers", 64, "goroutines the inventory footprint benchmarks put from")

// FillInventory puts n instances and their bindings from
// -inventory.writers goroutines, in random id order.
func FillInventory(b *testing.B, s store.Store, n int) {
	ctx := context.Background()
	instances := make([]store.Instance, n)
	run := func(fn func(i int) error) {
		var wg sync.WaitGroup
		var next atomic.Int64
		for range *inventoryWriters {
			wg.Go(func() {
				for i := next.Add(1); i <= int64(n); i = next.Add(1) {
					if err := fn(int(i - 1)); err != nil {
						b.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
	}
	bind := func(i int) error {
		for range *inventoryBindings {
			if _, err := s.PutBinding(ctx, benchBinding(instances[i])); err != nil {
				return err
			}
		}
		return nil
	}
	run(func(i int) error {
		instances[i] = BenchInstance()
		if _, err := s.PutInstance(ctx, instances[i]); err != nil || *inventoryLater {
			return err
		}
		return bind(i)
	})
	if *inventoryLater {
		run(bind) // in the order of the instance ids' GUIDs: random
	}
}

// ImportInventory imports n instances and their bindings in batches of
// about 1000 entries, as `inventory import` does.
func ImportInventory(b *testing.B, s store.Store, n int) {
	ctx := context.Background()
	batch := make([]store.Entry, 0, 1000)
	flush := func() {
		if _, err := s.Import(ctx, batch, true); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for range n {
		in := BenchInstance()
		batch = append(batch, store.Entry{Instance: &in})
		for range *inventoryBindings {
			bd := benchBinding(in)
			batch = append(batch, store.Entry{Binding: &bd})
		}
		if len(batch) >= cap(batch)-*inventoryBindings {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// ReportFootprint reports bytes for n instances per 10k and per million.
func ReportFootprint(b *testing.B, bytes float64, n int) {
	b.ReportMetric(bytes/float64(n), "B/instance")
	b.ReportMetric(bytes/float64(n)*10_000/(1<<20), "MB/10k")
	b.ReportMetric(bytes/float64(n)*1_000_000/(1<<20), "MB/1M")
}

// Reimport imports the export of from into to in batches of 1000
// entries, as `inventory export` and `inventory import` do.
func Reimport(b *testing.B, from, to store.Store) {
	ctx := context.Background()
	batch := make([]store.Entry, 0, 1000)
	for e, err := range from.Export(ctx) {
		if err != nil {
			b.Fatal(err)
		}
		if batch = append(batch, e); len(batch) == cap(batch) {
			if _, err := to.Import(ctx, batch, false); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := to.Import(ctx, batch, false); err != nil {
		b.Fatal(err)
	}
}

// BenchLock is a realistic lock: GUIDs, an operation, a traceparent.
func BenchLock(instance, owner string) store.Lock {
	return store.Lock{
		Key: store.LockKey("mysql-broker", instance), Owner: owner, Kind: store.KindProvision,
		Tenant: "cf-prod-eu", Broker: "mysql-broker", InstanceID: instance,
		ServiceID: "3f0e5e2c-1c9a-4d57-8a3e-7f2b9c1d4e60", PlanID: "9d3c2b1a-8e7f-4a6b-9c5d-2e1f0a3b4c5d",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Deadline:    time.Now().Add(time.Hour),
	}
}

// GUID returns a random GUID.
func GUID() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// FootprintLocks is how many async locks the footprint benchmarks hold.
const FootprintLocks = 100_000

// FillLocks acquires and updates to async FootprintLocks locks from 64
// goroutines.
func FillLocks(b *testing.B, s store.Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= FootprintLocks; i = next.Add(1) {
				l := BenchLock(GUID(), fmt.Sprintf("%032x", i))
				if _, err := s.Acquire(ctx, l); err != nil {
					b.Error(err)
					return
				}
				l.Async, l.Operation = true, "provision-"+GUID()
				if err := s.Update(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}
