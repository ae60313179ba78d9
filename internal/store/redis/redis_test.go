package redis

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

func init() {
	redis.SetLogger(quiet{}) // go-redis logs dial failures the tests cause on purpose
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func openRedisAt(t testing.TB, cfg store.Config, now func() time.Time) *redisStore {
	t.Helper()
	s, err := Open(cfg.WithDefaults().Redis, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s.(*redisStore)
}

func TestRedis(t *testing.T) {
	srv := storetest.StartRedis(t)
	storetest.Contract(t, storetest.Backend{
		Open: func(t *testing.T, now func() time.Time) store.Store {
			return openRedisAt(t, srv.StoreConfig(), now)
		},
		Reopen: func(t *testing.T, s store.Store, now func() time.Time) store.Store {
			cfg := s.(*redisStore).cfg
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			return openRedisAt(t, store.Config{Backend: store.BackendRedis, Redis: cfg}, now)
		},
	})
}

// TestRedisCluster runs the contract on a three-master Redis Cluster, and
// checks that locks spread over the masters are all listed.
func TestRedisCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Redis Cluster")
	}
	cluster := storetest.StartRedisCluster(t, 3)
	config := func() store.Config {
		cfg := cluster.Nodes[0].StoreConfig()
		cfg.Redis.Addrs = cluster.Addrs
		return cfg
	}
	reopen := func(t *testing.T, s store.Store, now func() time.Time) store.Store {
		cfg := s.(*redisStore).cfg
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		return openRedisAt(t, store.Config{Backend: store.BackendRedis, Redis: cfg}, now)
	}
	storetest.Contract(t, storetest.Backend{
		Open: func(t *testing.T, now func() time.Time) store.Store {
			s := openRedisAt(t, config(), now)
			if _, ok := s.client.(*redis.ClusterClient); !ok {
				t.Fatalf("client is %T, want a *redis.ClusterClient", s.client)
			}
			return s
		},
		Reopen: reopen,
	})

	t.Run("ListAcrossMasters", func(t *testing.T) {
		ctx := context.Background()
		s := openRedisAt(t, config(), osbtest.NewClock(storetest.T0).Now)
		const n = 30
		for i := range n {
			storetest.MustAcquire(t, s, storetest.Lock(fmt.Sprint("i", i), "owner", time.Hour))
		}
		got, err := s.List(ctx, store.ListFilter{})
		if err != nil || len(got) != n {
			t.Errorf("List = %d locks, %v; want %d", len(got), err, n)
		}
		used := 0
		for _, addr := range cluster.Addrs {
			c := redis.NewClient(&redis.Options{Addr: addr})
			if keys, _ := c.Keys(ctx, s.prefix+"lock:*").Result(); len(keys) > 0 {
				used++
			}
			c.Close()
		}
		if used < 2 {
			t.Errorf("locks on %d masters, want them spread", used)
		}
	})
}

// TestRedisKeys checks the keys and their TTL: time to the deadline plus
// RedisTTLMargin, renewed by Update.
func TestRedisKeys(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()

	l := storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Minute))
	key := s.prefix + "lock:b1/i1"
	wantTTL := func(want time.Duration) {
		t.Helper()
		got, err := raw.PTTL(ctx, key).Result()
		if err != nil || got > want || got < want-5*time.Second {
			t.Errorf("PTTL %s = %s, %v; want %s", key, got, err, want)
		}
	}
	wantTTL(time.Minute + store.RedisTTLMargin)
	l.Deadline = storetest.T0.Add(time.Hour)
	if err := s.Update(ctx, l); err != nil {
		t.Fatal(err)
	}
	wantTTL(time.Hour + store.RedisTTLMargin)

	if err := s.PutOrphan(ctx, storetest.Orphan("o1", storetest.T0)); err != nil {
		t.Fatal(err)
	}
	keys, err := raw.Keys(ctx, s.prefix+"*").Result()
	if err != nil || len(keys) != 4 {
		t.Errorf("keys under %s = %q, %v; want the epoch marker, the lock, the orphans and their due set", s.prefix, keys, err)
	}
	if err := s.Release(ctx, l.Key, l.Owner); err != nil {
		t.Fatal(err)
	}
	if n, err := raw.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Errorf("EXISTS %s after Release = %d, %v; want 0", key, n, err)
	}
}

// TestRedisServerDown stops redis-server under a Store: every call fails
// quickly with ErrUnavailable, and the same Store works again once the
// server is back, with its data.
func TestRedisServerDown(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), time.Now)
	l := storetest.Lock("i1", "owner-1", time.Hour) // t0 is in the future: live
	storetest.MustAcquire(t, s, l)

	srv.Stop()
	start := time.Now()
	errs := storetest.Calls(ctx, s)
	took := time.Since(start)
	for name, err := range errs {
		storetest.WantErr(t, name+" with the server down", err, store.ErrUnavailable)
	}
	if took > 5*time.Second {
		t.Errorf("%d calls with the server down took %s, want them quick", len(errs), took)
	}

	srv.Start()
	start = time.Now()
	waitPing(t, s)
	t.Logf("%d calls with the server down took %s; Ping answered %s after the restart", len(errs), took, time.Since(start))
	_, err := s.Acquire(ctx, storetest.Lock("i1", "owner-2", time.Hour))
	storetest.WantErr(t, "Acquire after the server restarted", err, store.ErrHeld)
}

// TestRedisServerHangs pauses redis-server: a call returns the context's
// error when its context ends first (well before the read timeout), else
// ErrUnavailable after the read timeout.
func TestRedisServerHangs(t *testing.T) {
	srv := storetest.StartRedis(t)
	slow := srv.StoreConfig()
	slow.Redis.ReadTimeout = 10 * time.Second
	patient := openRedisAt(t, slow, time.Now)
	quick := srv.StoreConfig()
	quick.Redis.ReadTimeout = 300 * time.Millisecond
	impatient := openRedisAt(t, quick, time.Now)
	waitPing(t, patient)
	waitPing(t, impatient)

	srv.Pause()
	defer srv.Resume()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := patient.Get(ctx, "b1/i1")
	storetest.WantErr(t, "Get with a 50ms context", err, context.DeadlineExceeded)
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("Get with a 50ms context took %s, want it to end with the context", took)
	}
	_, err = impatient.Get(context.Background(), "b1/i1")
	storetest.WantErr(t, "Get without a deadline", err, store.ErrUnavailable)

	srv.Resume()
	waitPing(t, patient)
}

// waitPing waits until s answers Ping.
func waitPing(t *testing.T, s store.Store) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := s.Ping(context.Background())
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("store does not answer Ping: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRedisRoundTrips(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
	var rt storetest.RoundTrips
	s.client.AddHook(&rt)
	l := storetest.Lock("i1", "owner-1", time.Hour)

	tests := []struct {
		name string
		call func() error
		want int64
	}{
		{"Acquire of a free lock", func() error { _, err := s.Acquire(ctx, l); return err }, 1},
		{"Acquire of a held lock", func() error {
			_, err := s.Acquire(ctx, storetest.Lock("i1", "owner-2", time.Hour))
			if errors.Is(err, store.ErrHeld) {
				return nil
			}
			return err
		}, 2},
		// AcquireReading: the acquire and the record's read in one
		// pipeline.
		{"AcquireReading of a free lock", func() error {
			_, _, err := s.AcquireReading(ctx, storetest.Lock("i2", "owner-1", time.Hour))
			return err
		}, 1},
		{"AcquireReading of a held lock", func() error {
			_, _, err := s.AcquireReading(ctx, storetest.Lock("i2", "owner-2", time.Hour))
			if errors.Is(err, store.ErrHeld) {
				return nil
			}
			return err
		}, 2},
		{"Release after AcquireReading", func() error { return s.Release(ctx, store.LockKey("b1", "i2"), "owner-1") }, 1},
		{"Update", func() error { return s.Update(ctx, l) }, 1},
		{"Get", func() error { _, err := s.Get(ctx, l.Key); return err }, 1},
		{"Release", func() error { return s.Release(ctx, l.Key, l.Owner) }, 1},
		{"PutOrphan", func() error { return s.PutOrphan(ctx, storetest.Orphan("o1", storetest.T0)) }, 1},
		{"ClaimOrphan", func() error { _, err := s.ClaimOrphan(ctx, "o1", "replica-a", storetest.T0.Add(time.Hour)); return err }, 1},
		{"DueOrphans", func() error { _, err := s.DueOrphans(ctx, storetest.T0, 10); return err }, 1},
	}
	// The first pass loads the scripts (EVALSHA fails, EVAL follows) and
	// dials (HELLO, CLIENT SETINFO); the second counts.
	for pass := range 2 {
		for _, tc := range tests {
			rt.N.Store(0)
			if err := tc.call(); err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			if got := rt.N.Load(); pass == 1 && got != tc.want {
				t.Errorf("%s took %d round trips, want %d", tc.name, got, tc.want)
			}
		}
	}
}
