package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// pgReveals reports whether any value of any table the store writes, read
// as the server sends it, shows the marker.
func pgReveals(t *testing.T, s *pgStore) bool {
	ctx := context.Background()
	found := false
	// Every table of the store's schema, so a table added later is read too.
	rows, err := s.pool.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || !slices.Contains(tables, "console_sessions") || !slices.Contains(tables, "locks") {
		t.Fatalf("the store's tables: %v, %v", tables, err)
	}
	for _, table := range tables {
		rows, err := s.pool.Query(ctx, "SELECT * FROM "+table)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for rows.Next() {
			for _, v := range rows.RawValues() {
				found = found || storetest.RevealsSecret(v)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
	}
	return found
}

// TestSecretMarkerPostgres: sealed parameters and credentials never show
// in the database; the same scan finds the marker put in plain text in a
// field that is not secret.
func TestSecretMarkerPostgres(t *testing.T) {
	keys := storetest.SecretKeys(t)
	srv := storetest.StartPostgres(t)
	for _, leak := range []bool{false, true} {
		s := openAt(t, srv.StoreConfig(t), osbtest.NewClock(storetest.T0).Now)
		storetest.PutSecrets(t, s, keys, leak)
		// A lock, an orphan and a deletion's usage record beside the
		// inventory, so the scan covers every table.
		storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
		if err := s.PutOrphan(context.Background(), storetest.Orphan("o1", storetest.T0)); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteBinding(context.Background(), "b1", "i1", "x2"); err != nil {
			t.Fatal(err)
		}
		if got := pgReveals(t, s); got != leak {
			t.Errorf("with the marker in plain text %t: the database shows it: %t", leak, got)
		}
	}
}
