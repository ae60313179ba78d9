package store

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// Benchmarks: go test -run '^$' -bench . -benchtime 1x ./internal/store
// for the footprint figures (they fill 100,000 locks once, whatever b.N),
// default -benchtime for the per-call ones.

// benchStores opens one Store per backend; redis skips if redis-server is
// missing. rt counts redis round trips.
func benchStores(b *testing.B) map[string]func(b *testing.B) (Store, *roundTrips) {
	return map[string]func(b *testing.B) (Store, *roundTrips){
		"memory": func(b *testing.B) (Store, *roundTrips) {
			s, _ := Open(Config{Backend: BackendMemory}, time.Now)
			return s, nil
		},
		"bolt": func(b *testing.B) (Store, *roundTrips) {
			return openBoltAt(b, filepath.Join(b.TempDir(), "state.db"), time.Now), nil
		},
		"redis": func(b *testing.B) (Store, *roundTrips) {
			s := openRedisAt(b, redisConfig(storetest.StartRedis(b)), time.Now)
			rt := &roundTrips{}
			s.client.AddHook(rt)
			return s, rt
		},
	}
}

// benchLock is a realistic lock: GUIDs, an operation, a traceparent.
func benchLock(instance, owner string) Lock {
	return Lock{
		Key: LockKey("mysql-broker", instance), Owner: owner, Kind: KindProvision,
		Tenant: "cf-prod-eu", Broker: "mysql-broker", InstanceID: instance,
		ServiceID: "3f0e5e2c-1c9a-4d57-8a3e-7f2b9c1d4e60", PlanID: "9d3c2b1a-8e7f-4a6b-9c5d-2e1f0a3b4c5d",
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		Deadline:    time.Now().Add(time.Hour),
	}
}

func guid() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, name := range []string{"memory", "bolt", "redis"} {
		b.Run(name, func(b *testing.B) {
			s, rt := benchStores(b)[name](b)
			l := benchLock(guid(), "owner")
			for range 2 { // load scripts, dial
				mustAcquireB(b, s, l)
				mustReleaseB(b, s, l)
			}
			if rt != nil {
				rt.n.Store(0)
			}
			b.ResetTimer()
			for range b.N {
				mustAcquireB(b, s, l)
				mustReleaseB(b, s, l)
			}
			if rt != nil {
				b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
			}
		})
	}
}

// BenchmarkAcquireReleaseParallel runs 64 goroutines, each taking and
// releasing locks on its own instances: bolt shares commits among them.
func BenchmarkAcquireReleaseParallel(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt", "redis"} {
		b.Run(name, func(b *testing.B) {
			s, _ := benchStores(b)[name](b)
			var n atomic.Int64
			b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				l := benchLock(guid(), fmt.Sprint("owner-", n.Add(1)))
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

func mustAcquireB(b *testing.B, s Store, l Lock) {
	if _, err := s.Acquire(context.Background(), l); err != nil {
		b.Fatal(err)
	}
}

func mustReleaseB(b *testing.B, s Store, l Lock) {
	if err := s.Release(context.Background(), l.Key, l.Owner); err != nil {
		b.Fatal(err)
	}
}

// footprintLocks is how many async locks the footprint benchmarks hold.
const footprintLocks = 100_000

// fill acquires and updates to async footprintLocks locks from 64
// goroutines.
func fill(b *testing.B, s Store) {
	ctx := context.Background()
	var wg sync.WaitGroup
	var next atomic.Int64
	for range 64 {
		wg.Go(func() {
			for i := next.Add(1); i <= footprintLocks; i = next.Add(1) {
				l := benchLock(guid(), fmt.Sprintf("%032x", i))
				if _, err := s.Acquire(ctx, l); err != nil {
					b.Error(err)
					return
				}
				l.Async, l.Operation = true, "provision-"+guid()
				if err := s.Update(ctx, l); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func BenchmarkFootprintMemory(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s, _ := Open(Config{Backend: BackendMemory}, time.Now)
	fill(b, s)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	b.ReportMetric(heap/(1<<20), "MB/100k-locks")
	b.ReportMetric(heap/footprintLocks, "B/lock")
}

func BenchmarkFootprintBolt(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	s := openBoltAt(b, path, time.Now)
	start := time.Now()
	fill(b, s)
	took := time.Since(start)
	fi, err := os.Stat(path)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(fi.Size())/(1<<20), "MB/100k-locks")
	err = s.(*boltStore).db.View(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketLocks).Stats()
		b.ReportMetric(float64(st.LeafInuse+st.BranchInuse)/(1<<20), "MB-lock-records")
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(2*footprintLocks)/took.Seconds(), "writes/s")
}

// BenchmarkGetMissing is what every last_operation poll of an operation the
// gateway does not track costs the guard: a Get that finds nothing.
func BenchmarkGetMissing(b *testing.B) {
	ctx := context.Background()
	for _, name := range []string{"memory", "bolt"} {
		b.Run(name, func(b *testing.B) {
			s, _ := benchStores(b)[name](b)
			key := LockKey("mysql-broker", guid())
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
					b.Fatalf("Get of a missing key: %v, want ErrNotFound", err)
				}
			}
		})
	}
}
