package postgres

import (
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func openAt(t testing.TB, cfg store.Config, now func() time.Time) *pgStore {
	t.Helper()
	s, err := Open(cfg.WithDefaults().Postgres, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*pgStore)
}

// TestPostgres runs the contract on one server, each test on a schema of
// its own.
func TestPostgres(t *testing.T) {
	srv := storetest.StartPostgres(t)
	storetest.Contract(t, storetest.Backend{
		Open: func(t *testing.T, now func() time.Time) store.Store {
			return openAt(t, srv.StoreConfig(t), now)
		},
		Reopen: func(t *testing.T, s store.Store, now func() time.Time) store.Store {
			cfg := s.(*pgStore).cfg
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openAt(t, store.Config{Backend: store.BackendPostgres, Postgres: cfg}, now)
		},
	})
}
