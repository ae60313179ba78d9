package main

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// TestSharedLocksKeepTimeThroughAStep: replicas sharing Redis or
// PostgreSQL set and judge lock deadlines on the store server's clock, not
// their machines': a replica whose machine is ten minutes ahead does not
// take (or sweep) the lock another replica holds, and the locks of one ten
// minutes behind are not expired to the others. On each machine's own
// clock both would be (the fault campaign's clock-jump).
func TestSharedLocksKeepTimeThroughAStep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state func(t *testing.T) config.State
	}{
		{"redis", func(t *testing.T) config.State {
			r := storetest.StartRedis(t)
			return config.State{Backend: store.BackendRedis, Redis: config.StateRedis{Addrs: []string{r.Addr}}}
		}},
		{"postgres", func(t *testing.T) config.State {
			url := storetest.StartPostgres(t).StoreConfig(t).Postgres.URL
			return config.State{Backend: store.BackendPostgres, Postgres: config.StatePostgres{URL: config.Secret(url)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.state(t)
			log := slog.New(slog.DiscardHandler)
			type replica struct {
				st  store.Store
				now func() time.Time
			}
			open := func(step time.Duration) replica {
				st, clk, err := openStoreOn(sc, log, func() time.Time { return time.Now().Add(step) })
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				if clk == nil || !clk.Synced() {
					t.Fatalf("%s: no server clock read at start", sc.Backend)
				}
				return replica{st, nowOf(clk)}
			}
			on, ahead, behind := open(0), open(10*time.Minute), open(-10*time.Minute)
			ctx := context.Background()
			lock := func(r replica, key, owner string) error {
				_, err := r.st.Acquire(ctx, store.Lock{Key: key, Owner: owner, Kind: store.KindProvision,
					Deadline: r.now().Add(30 * time.Second)})
				return err
			}

			if err := lock(on, "b/i1", "on"); err != nil {
				t.Fatal(err)
			}
			if err := lock(ahead, "b/i1", "ahead"); !errors.Is(err, store.ErrHeld) {
				t.Errorf("a replica ten minutes ahead took a live lock: %v, want ErrHeld", err)
			}
			if gone, err := ahead.st.ExpireDue(ctx, ahead.now()); err != nil || len(gone) != 0 {
				t.Errorf("a replica ten minutes ahead swept %v (%v), want nothing", gone, err)
			}
			if err := lock(behind, "b/i2", "behind"); err != nil {
				t.Fatal(err)
			}
			if err := lock(on, "b/i2", "on"); !errors.Is(err, store.ErrHeld) {
				t.Errorf("the lock of a replica ten minutes behind was taken as expired: %v, want ErrHeld", err)
			}
			if d := ahead.now().Sub(behind.now()); d > 5*time.Second || d < -5*time.Second {
				t.Errorf("the replicas' clocks differ by %s, want the server's on both", d)
			}
		})
	}
}
