package bolt

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// BenchmarkUsageFootprintBolt fills -inventory.n instances with
// -inventory.bindings bindings each (as BenchmarkInventoryFootprintBolt's
// put), deletes every instance (a usage record for it and one per
// binding), and reports the pages of inv_usage per deleted instance: what
// an instance deprovisioned within inventory.usage_retention costs.
func BenchmarkUsageFootprintBolt(b *testing.B) {
	n := *storetest.InventoryN
	s := openBoltAt(b, filepath.Join(b.TempDir(), "state.db"), time.Now)
	storetest.FillInventory(b, s, n)
	ctx := context.Background()
	var ids []string
	for e, err := range s.Export(ctx) {
		if err != nil {
			b.Fatal(err)
		}
		if e.Instance != nil {
			ids = append(ids, e.Instance.InstanceID)
		}
	}
	start := time.Now()
	for _, id := range ids {
		if _, err := s.DeleteInstance(ctx, "mysql-broker", id); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(ids))/time.Since(start).Seconds(), "deletes/s")
	s.(*boltStore).db.View(func(tx *bolt.Tx) error {
		st := tx.Bucket(bucketUsage).Stats()
		b.ReportMetric(float64(st.LeafAlloc+st.BranchAlloc)/float64(len(ids)), "B/deleted-instance-inv_usage")
		b.ReportMetric(float64(st.LeafInuse)/float64(max(st.LeafAlloc, 1))*100, "%full-inv_usage")
		b.ReportMetric(float64(st.KeyN)/float64(len(ids)), "records/deleted-instance")
		return nil
	})
}

// BenchmarkInventoryFootprintBolt fills a bolt file by puts from 64
// goroutines, by import in random id order, by import of another file's
// export (sorted: `inventory export` then `inventory import`), and by
// bbolt's Compact of a file filled by import (every page full).
func BenchmarkInventoryFootprintBolt(b *testing.B) {
	for _, how := range []string{"put", "import", "reimport", "compact"} {
		b.Run(how, func(b *testing.B) {
			n := *storetest.InventoryN
			path := filepath.Join(b.TempDir(), "state.db")
			var db *bolt.DB
			start := time.Now()
			if how == "put" || how == "import" {
				s := openBoltAt(b, path, time.Now)
				db = s.(*boltStore).db
				if how == "put" {
					storetest.FillInventory(b, s, n)
				} else {
					storetest.ImportInventory(b, s, n)
				}
			} else {
				src := openBoltAt(b, filepath.Join(b.TempDir(), "src.db"), time.Now)
				storetest.ImportInventory(b, src, n)
				start = time.Now()
				if how == "reimport" {
					s := openBoltAt(b, path, time.Now)
					db = s.(*boltStore).db
					storetest.Reimport(b, src, s)
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
			storetest.ReportFootprint(b, float64(fi.Size()), n)
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

func BenchmarkFootprintBolt(b *testing.B) {
	path := filepath.Join(b.TempDir(), "state.db")
	s := openBoltAt(b, path, time.Now)
	start := time.Now()
	storetest.FillLocks(b, s)
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
	b.ReportMetric(float64(2*storetest.FootprintLocks)/took.Seconds(), "writes/s")
}
