package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// BenchmarkInventoryFootprintPostgres reports the size of the inventory's
// tables with their indexes and TOAST (pg_total_relation_size), after a
// VACUUM, per instance with its bindings.
func BenchmarkInventoryFootprintPostgres(b *testing.B) {
	n := *storetest.InventoryN
	srv := storetest.StartPostgres(b)
	s := openAt(b, srv.StoreConfig(b), time.Now)
	ctx := context.Background()
	size := func() float64 {
		if _, err := s.pool.Exec(ctx, `VACUUM instances, bindings`); err != nil {
			b.Fatal(err)
		}
		var total int64
		err := s.pool.QueryRow(ctx, `SELECT pg_total_relation_size('instances') + pg_total_relation_size('bindings')`).Scan(&total)
		if err != nil {
			b.Fatal(err)
		}
		return float64(total)
	}
	if err := Migrate(ctx, s); err != nil {
		b.Fatal(err)
	}
	before := size()
	storetest.ImportInventory(b, s, n)
	storetest.ReportFootprint(b, size()-before, n)
}
