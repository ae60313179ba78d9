package store

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkUsageFootprintBolt fills -inventory.n instances with
// -inventory.bindings bindings each (as BenchmarkInventoryFootprintBolt's
// put), deletes every instance (a usage record for it and one per
// binding), and reports the pages of inv_usage per deleted instance: what
// an instance deprovisioned within inventory.usage_retention costs.
func BenchmarkUsageFootprintBolt(b *testing.B) {
	n := *inventoryN
	s := openBoltAt(b, filepath.Join(b.TempDir(), "state.db"), time.Now)
	fillInventory(b, s, n)
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
