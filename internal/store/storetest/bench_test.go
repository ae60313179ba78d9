package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	redisstore "github.com/osb-gateway/osb-gateway/internal/store/redis"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// Benchmarks: go test -p 1 -run '^$' -bench . -benchtime 1x ./internal/store/...
// for the footprint figures (they fill 100,000 locks once, whatever b.N),
// default -benchtime for the per-call ones.

// benchStores opens one Store per backend; redis and postgres skip if
// their servers are not installed. rt counts redis round trips.
func benchStores(b *testing.B) map[string]func(b *testing.B) (store.Store, *storetest.RoundTrips) {
	return map[string]func(b *testing.B) (store.Store, *storetest.RoundTrips){
		"memory": func(b *testing.B) (store.Store, *storetest.RoundTrips) {
			s, _ := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
			return s, nil
		},
		"bolt": func(b *testing.B) (store.Store, *storetest.RoundTrips) {
			return openBench(b, store.Config{Backend: store.BackendBolt, Path: filepath.Join(b.TempDir(), "state.db"),
				OpenTimeout: 100 * time.Millisecond}), nil
		},
		"redis": func(b *testing.B) (store.Store, *storetest.RoundTrips) {
			s := openBench(b, storetest.StartRedis(b).StoreConfig())
			rt := &storetest.RoundTrips{}
			client, _, _ := redisstore.ClientOf(s)
			client.AddHook(rt)
			return s, rt
		},
		"postgres": func(b *testing.B) (store.Store, *storetest.RoundTrips) {
			return openBench(b, storetest.StartPostgres(b).StoreConfig(b)), nil
		},
	}
}

// openBench opens the Store cfg names, closed when b ends.
func openBench(b *testing.B, cfg store.Config) store.Store {
	b.Helper()
	s, err := backend.Open(cfg, time.Now)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, name := range []string{"memory", "bolt", "redis", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s, rt := benchStores(b)[name](b)
			l := storetest.BenchLock(storetest.GUID(), "owner")
			for range 2 { // load scripts, dial
				mustAcquireB(b, s, l)
				mustReleaseB(b, s, l)
			}
			if rt != nil {
				rt.N.Store(0)
			}
			b.ResetTimer()
			for range b.N {
				mustAcquireB(b, s, l)
				mustReleaseB(b, s, l)
			}
			if rt != nil {
				b.ReportMetric(float64(rt.N.Load())/float64(b.N), "roundtrips/op")
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel runs 64 goroutines, each taking and
// releasing locks on its own instances: bolt shares commits among them.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt", "redis", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s, _ := benchStores(b)[name](b)
			var n atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := storetest.BenchLock(storetest.GUID(), fmt.Sprint("owner-", n.Add(1)))
				for pb.Next() {
					if _, err := s.Acquire(ctx, l); err != nil {
						b.Error(err)
						return
					}
					if err := s.Release(ctx, l.Key, l.Owner); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(2*b.N)/b.Elapsed().Seconds(), "calls/s")
		})
	}
}

func mustAcquireB(b *testing.B, s store.Store, l store.Lock) {
	if _, err := s.Acquire(context.Background(), l); err != nil {
		b.Fatal(err)
	}
}

func mustReleaseB(b *testing.B, s store.Store, l store.Lock) {
	if err := s.Release(context.Background(), l.Key, l.Owner); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkGetMissing is what every last_operation poll of an operation the
// gateway does not track costs the guard: a Get that finds nothing.
func BenchmarkGetMissing(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt"} {
		b.Run(name, func(b *testing.B) {
			s, _ := benchStores(b)[name](b)
			key := store.LockKey("mysql-broker", storetest.GUID())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
					b.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
				}
			}
		})
	}
}

// BenchmarkInventoryOps measures one call of each kind on an inventory of
// 10,000 instances.
func BenchmarkInventoryOps(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt", "redis", "postgres"} {
		b.Run(name, func(b *testing.B) {
			s, rt := benchStores(b)[name](b)
			storetest.ImportInventory(b, s, 10_000)
			in := storetest.BenchInstance()
			in.InstanceID = "bench-instance"
			ops := []struct {
				name string
				fn   func() error
			}{
				{"put", func() error { _, err := s.PutInstance(ctx, in); return err }},
				{"get", func() error { _, err := s.GetInstance(ctx, in.Broker, in.InstanceID); return err }},
				{"list100", func() error {
					_, _, err := s.ListInstances(ctx, store.InstanceFilter{Broker: in.Broker, Tenant: in.Tenant}, "", 100)
					return err
				}},
				{"count", func() error { _, err := s.CountInstances(ctx, store.InstanceFilter{Tenant: in.Tenant}); return err }},
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
						rt.N.Store(0)
					}
					b.ResetTimer()
					for range b.N {
						if err := op.fn(); err != nil {
							b.Fatal(err)
						}
					}
					if rt != nil {
						b.ReportMetric(float64(rt.N.Load())/float64(b.N), "roundtrips/op")
					}
				})
			}
		})
	}
}
