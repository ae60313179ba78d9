package memory

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func BenchmarkInventoryFootprintMemory(b *testing.B) {
	n := *storetest.InventoryN
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(time.Now)
	storetest.FillInventory(b, s, n)
	if _, _, err := s.ListInstances(context.Background(), store.InstanceFilter{}, "", 1); err != nil {
		b.Fatal(err) // merges the ordered keys: the steady state
	}
	runtime.GC()
	runtime.GC() // and the pools' victim caches
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	storetest.ReportFootprint(b, float64(after.HeapAlloc)-float64(before.HeapAlloc), n)
}

func BenchmarkFootprintMemory(b *testing.B) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := New(time.Now)
	storetest.FillLocks(b, s)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	heap := float64(after.HeapAlloc) - float64(before.HeapAlloc)
	b.ReportMetric(heap/(1<<20), "MB/100k-locks")
	b.ReportMetric(heap/storetest.FootprintLocks, "B/lock")
}
