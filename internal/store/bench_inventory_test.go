package store

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// Inventory benchmarks:
//
//	go test ./internal/store -run '^$' -bench 'Inventory' -benchtime 1x
//
// The footprint ones fill -inventory.n instances once (default 100,000;
// -inventory.n 1000000 checks the budget of 1 GB per million directly),
// each with -inventory.bindings bindings (default 1), and report bytes per
// instance and per 10,000 instances (with their bindings) and the
// projection to a million.

var inventoryN = flag.Int("inventory.n", 100_000, "instances the inventory footprint benchmarks fill")

// inventoryBindings is how many bindings each instance has.
var inventoryBindings = flag.Int("inventory.bindings", 1, "bindings of each instance the inventory footprint benchmarks fill")

// inventorySecrets makes the footprint benchmarks keep sealed parameters
// too (113 bytes: 80 of JSON sealed), and sealed credentials on the
// bindings (145 bytes: 112 of JSON sealed).
var inventorySecrets = flag.Bool("inventory.secrets", false, "inventory footprint benchmarks store sealed parameters")

// benchInstance is an instance as Cloud Controller provisions it through
// the gateway: GUIDs, the 2.15 context with names and empty annotations, a
// dashboard URL, maintenance_info, an asynchronous provision's last
// operation.
func benchInstance() Instance {
	id, org, space := guid(), guid(), guid()
	now := time.Now()
	in := Instance{
		Broker: "mysql-broker", InstanceID: id, Tenant: "cf-prod-eu",
		ServiceID: "3f0e5e2c-1c9a-4d57-8a3e-7f2b9c1d4e60", PlanID: "9d3c2b1a-8e7f-4a6b-9c5d-2e1f0a3b4c5d",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"` + org +
			`","organization_name":"acme-payments","space_guid":"` + space + `","space_name":"production",` +
			`"instance_name":"orders-db-` + id[:8] + `","organization_annotations":{},"space_annotations":{},"instance_annotations":{}}`),
		OrganizationGUID: org, SpaceGUID: space,
		DashboardURL:    "https://mysql.example.com/dashboard/instances/" + id,
		MaintenanceInfo: json.RawMessage(`{"version":"8.0.36"}`),
		LastOperation: LastOperation{
			Kind: KindProvision, State: StateSucceeded, Description: "provisioned",
			Operation: "provision-" + guid(), Status: 200, Started: now.Add(-time.Minute), Ended: now,
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
func benchBinding(in Instance) Binding {
	app, now := guid(), time.Now()
	bd := Binding{
		Broker: in.Broker, InstanceID: in.InstanceID, BindingID: guid(), Tenant: in.Tenant,
		ServiceID: in.ServiceID, PlanID: in.PlanID, AppGUID: app,
		BindResource: json.RawMessage(`{"app_guid":"` + app + `","space_guid":"` + in.SpaceGUID + `"}`),
		ExpiresAt:    now.Add(90 * 24 * time.Hour), RenewBefore: now.Add(60 * 24 * time.Hour),
		LastOperation: LastOperation{Kind: KindBind, State: StateSucceeded, Status: 201, Started: now, Ended: now},
		Created:       now, Updated: now,
	}
	if *inventorySecrets {
		bd.SealedCredentials = make([]byte, 112+33)
		rand.Read(bd.SealedCredentials)
	}
	return bd
}

// inventoryLater makes fillInventory put every instance first and their
// bindings after, as a platform whose apps bind long after the provision
// does (by default each instance's bindings follow it at once).
var inventoryLater = flag.Bool("inventory.later", false, "inventory footprint benchmarks put the bindings after all the instances")

// inventoryWriters is how many goroutines fillInventory puts from: with
// one, every put is a commit of its own, as at a gateway with one
// operation at a time; with many, the bolt backend's commits take several.
var inventoryWriters = flag.Int("inventory.writers", 64, "goroutines the inventory footprint benchmarks put from")

// fillInventory puts n instances and their bindings from
// -inventory.writers goroutines, in random id order.
func fillInventory(b *testing.B, s Store, n int) {
	ctx := context.Background()
	instances := make([]Instance, n)
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
		instances[i] = benchInstance()
		if _, err := s.PutInstance(ctx, instances[i]); err != nil || *inventoryLater {
			return err
		}
		return bind(i)
	})
	if *inventoryLater {
		run(bind) // in the order of the instance ids' GUIDs: random
	}
}

// importInventory imports n instances and their bindings in batches of
// about 1000 entries, as `inventory import` does.
func importInventory(b *testing.B, s Store, n int) {
	ctx := context.Background()
	batch := make([]Entry, 0, 1000)
	flush := func() {
		if _, err := s.Import(ctx, batch, true); err != nil {
			b.Fatal(err)
		}
		batch = batch[:0]
	}
	for range n {
		in := benchInstance()
		batch = append(batch, Entry{Instance: &in})
		for range *inventoryBindings {
			bd := benchBinding(in)
			batch = append(batch, Entry{Binding: &bd})
		}
		if len(batch) >= cap(batch)-*inventoryBindings {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
}

// reportFootprint reports bytes for n instances per 10k and per million.
func reportFootprint(b *testing.B, bytes float64, n int) {
	b.ReportMetric(bytes/float64(n), "B/instance")
	b.ReportMetric(bytes/float64(n)*10_000/(1<<20), "MB/10k")
	b.ReportMetric(bytes/float64(n)*1_000_000/(1<<20), "MB/1M")
}

func BenchmarkInventoryRecordSize(b *testing.B) {
	in := benchInstance()
	_, rec, err := PrepareInstance(in, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	js, _ := json.Marshal(in)
	b.ReportMetric(float64(len(rec)), "B/record")
	b.ReportMetric(float64(len(js)), "B/json")
	bd := benchBinding(in)
	_, brec, err := PrepareBinding(bd, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	bjs, _ := json.Marshal(bd)
	b.ReportMetric(float64(len(brec)), "B/binding-record")
	b.ReportMetric(float64(len(bjs)), "B/binding-json")
}

// BenchmarkInventoryPack measures packing and unpacking one record (the
// deflate of inventory_pack.go) and the sizes before and after.
func BenchmarkInventoryPack(b *testing.B) {
	plain := encodeInstance(benchInstance())
	packed := pack(plain)
	b.Run("pack", func(b *testing.B) {
		for range b.N {
			pack(plain)
		}
		b.ReportMetric(float64(len(plain)), "B/plain")
		b.ReportMetric(float64(len(packed)), "B/packed")
	})
	b.Run("unpack", func(b *testing.B) {
		for range b.N {
			if err := Unpack(packed, func(string, []byte) error { return nil }); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		for range b.N {
			if _, err := DecodeInstance("b", "i", packed); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkInventoryFootprintMemory(b *testing.B) {
	n := *inventoryN
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, _ := Open(Config{Backend: BackendMemory}, time.Now)
	fillInventory(b, s, n)
	if _, _, err := s.ListInstances(context.Background(), InstanceFilter{}, "", 1); err != nil {
		b.Fatal(err) // merges the ordered keys: the steady state
	}
	runtime.GC()
	runtime.GC() // and the pools' victim caches
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	reportFootprint(b, float64(after.HeapAlloc)-float64(before.HeapAlloc), n)
}

// reimport imports the export of from into to in batches of 1000
// entries, as `inventory export` and `inventory import` do.
func reimport(b *testing.B, from, to Store) {
	ctx := context.Background()
	batch := make([]Entry, 0, 1000)
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

// BenchmarkInventoryFootprintBolt fills a bolt file by puts from 64
// goroutines, by import in random id order, by import of another file's
// export (sorted: `inventory export` then `inventory import`), and by
// bbolt's Compact of a file filled by import (every page full).
func BenchmarkInventoryFootprintBolt(b *testing.B) {
	for _, how := range []string{"put", "import", "reimport", "compact"} {
		b.Run(how, func(b *testing.B) {
			n := *inventoryN
			path := filepath.Join(b.TempDir(), "state.db")
			var db *bolt.DB
			start := time.Now()
			if how == "put" || how == "import" {
				s := openBoltAt(b, path, time.Now)
				db = s.(*boltStore).db
				if how == "put" {
					fillInventory(b, s, n)
				} else {
					importInventory(b, s, n)
				}
			} else {
				src := openBoltAt(b, filepath.Join(b.TempDir(), "src.db"), time.Now)
				importInventory(b, src, n)
				start = time.Now()
				if how == "reimport" {
					s := openBoltAt(b, path, time.Now)
					db = s.(*boltStore).db
					reimport(b, src, s)
				} else {
					var err error
					if db, err = bolt.Open(path, 0o600, nil); err != nil {
						b.Fatal(err)
					}
					defer db.Close()
					if err := bolt.Compact(db, src.(*boltStore).db, 64<<20); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(n)/time.Since(start).Seconds(), "instances/s")
			fi, err := os.Stat(path)
			if err != nil {
				b.Fatal(err)
			}
			reportFootprint(b, float64(fi.Size()), n)
			reportBuckets(b, db, n)
		})
	}
}

// reportBuckets reports the pages of each inventory bucket per instance
// (leaf and branch pages) and how full its leaf pages are, and the free
// pages per instance (the rest of the file is the other buckets).
func reportBuckets(b *testing.B, db *bolt.DB, n int) {
	db.View(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketValues, bucketIDs, bucketExpiry} {
			st := tx.Bucket(name).Stats()
			b.ReportMetric(float64(st.LeafAlloc+st.BranchAlloc)/float64(n), "B/instance-"+string(name))
			b.ReportMetric(float64(st.LeafInuse)/float64(max(st.LeafAlloc, 1))*100, "%full-"+string(name))
		}
		return nil
	})
	st := db.Stats()
	b.ReportMetric(float64((st.FreePageN+st.PendingPageN)*db.Info().PageSize)/float64(n), "B/instance-free")
}

func BenchmarkInventoryFootprintRedis(b *testing.B) {
	n := *inventoryN
	srv := storetest.StartRedis(b)
	s := openRedisAt(b, redisConfig(srv), time.Now)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	used := func() float64 {
		info, err := raw.Info(context.Background(), "memory").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\r\n") {
			if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
				f, _ := strconv.ParseFloat(v, 64)
				return f
			}
		}
		b.Fatal("INFO memory has no used_memory")
		return 0
	}
	before := used()
	importInventory(b, s, n)
	reportFootprint(b, used()-before, n)
}

// BenchmarkInventoryOps measures one call of each kind on an inventory of
// 10,000 instances.
func BenchmarkInventoryOps(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt", "redis"} {
		b.Run(name, func(b *testing.B) {
			s, rt := benchStores(b)[name](b)
			importInventory(b, s, 10_000)
			in := benchInstance()
			in.InstanceID = "bench-instance"
			ops := []struct {
				name string
				fn   func() error
			}{
				{"put", func() error { _, err := s.PutInstance(ctx, in); return err }},
				{"get", func() error { _, err := s.GetInstance(ctx, in.Broker, in.InstanceID); return err }},
				{"list100", func() error {
					_, _, err := s.ListInstances(ctx, InstanceFilter{Broker: in.Broker, Tenant: in.Tenant}, "", 100)
					return err
				}},
				{"count", func() error { _, err := s.CountInstances(ctx, InstanceFilter{Tenant: in.Tenant}); return err }},
				{"put+delete", func() error {
					if _, err := s.PutInstance(ctx, in); err != nil {
						return err
					}
					_, err := s.DeleteInstance(ctx, in.Broker, in.InstanceID)
					return err
				}},
			}
			for _, op := range ops {
				b.Run(op.name, func(b *testing.B) {
					if err := op.fn(); err != nil { // load scripts
						b.Fatal(err)
					}
					if rt != nil {
						rt.n.Store(0)
					}
					b.ResetTimer()
					for range b.N {
						if err := op.fn(); err != nil {
							b.Fatal(err)
						}
					}
					if rt != nil {
						b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
					}
				})
			}
		})
	}
}
