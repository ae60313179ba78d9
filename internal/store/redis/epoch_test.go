package redis

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// wantLost checks that err is the refusal of a store whose Redis lost its
// data: ErrLost (so ErrUnavailable: the gateway fails closed), saying what
// happened and what the operator does.
func wantLost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrLost) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%s: %v, want ErrLost", what, err)
	}
	for _, s := range []string{"restarted without persistence or was flushed", "osb-gateway state accept-loss"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

// unchecked is the operator's store on srv's data under cfg's prefix.
func unchecked(t *testing.T, cfg store.RedisConfig) store.Store {
	t.Helper()
	u, err := OpenUnchecked(cfg, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	return u
}

// TestRedisRestartedEmptyRefuses: Redis restarts empty on its port under
// a store that used it; the store refuses every call with ErrLost (it
// used to go on with an empty store: a lock of a call in flight gone), a
// store opened afterwards refuses too, and after AcceptLoss both serve.
func TestRedisRestartedEmptyRefuses(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	cfg := srv.StoreConfig()
	s := openRedisAt(t, cfg, time.Now)
	storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
	before, err := ReadEpoch(ctx, unchecked(t, s.cfg))
	if err != nil || before.State != EpochNew {
		t.Fatalf("epoch after the first call: %v, %v; want a new one", before, err)
	}

	srv.RestartEmpty()
	_, err = s.Acquire(ctx, storetest.Lock("i1", "owner-2", time.Hour))
	wantLost(t, "Acquire of the lost lock", err)
	for name, err := range storetest.Calls(ctx, s) {
		wantLost(t, name+" after the loss", err)
	}
	later := openRedisAt(t, cfg, time.Now)
	wantLost(t, "Ping of a store opened after the loss", later.Ping(ctx))

	u := unchecked(t, s.cfg)
	e, err := ReadEpoch(ctx, u)
	if err != nil || e.State != EpochLost || e.Token != before.Token {
		t.Fatalf("epoch after the loss: %v, %v; want epoch %s lost", e, err, before.Token)
	}
	was, now, err := AcceptLoss(ctx, u)
	if err != nil || was.State != EpochLost || now.State != EpochAccepted || now.Lost != before.Token {
		t.Fatalf("AcceptLoss = %v, %v, %v", was, now, err)
	}
	storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-2", time.Hour)) // the lock was lost: free
	if _, err := later.Acquire(ctx, storetest.Lock("i1", "owner-3", time.Hour)); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Acquire through the later store after the acceptance: %v, want ErrHeld", err)
	}
	if _, _, err := AcceptLoss(ctx, u); !errors.Is(err, ErrNotLost) {
		t.Errorf("AcceptLoss of a store that has its data: %v, want ErrNotLost", err)
	}

	// A second loss is noticed as the first: the stores serve the
	// accepted epoch now.
	srv.RestartEmpty()
	wantLost(t, "Ping after a second loss", s.Ping(ctx))
	wantLost(t, "Ping of the later store after a second loss", later.Ping(ctx))
}

// TestRedisRestartedWithDataServes: a Redis that restarts with its data
// (saved and loaded, as with persistence) keeps the epoch marker, and is
// no loss: the lock still holds, through the same store and a new one.
func TestRedisRestartedWithDataServes(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	cfg := srv.StoreConfig()
	s := openRedisAt(t, cfg, time.Now)
	storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
	before, err := ReadEpoch(ctx, s)
	if err != nil || before.State != EpochNew {
		t.Fatalf("epoch: %v, %v; want a new one", before, err)
	}
	srv.Stop() // SHUTDOWN SAVE
	srv.Start()
	waitPing(t, s)
	if _, err := s.Acquire(ctx, storetest.Lock("i1", "owner-2", time.Hour)); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Acquire after a restart with the data: %v, want ErrHeld", err)
	}
	again := openRedisAt(t, cfg, time.Now)
	if _, err := again.Acquire(ctx, storetest.Lock("i1", "owner-3", time.Hour)); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Acquire through a new store: %v, want ErrHeld", err)
	}
	if after, err := ReadEpoch(ctx, again); err != nil || after != before {
		t.Errorf("epoch after the restart: %v, %v; want %v", after, err, before)
	}
}

// TestRedisFreshIsNewEpoch: stores starting together on an empty Redis
// take it for a new store, all with the same epoch.
func TestRedisFreshIsNewEpoch(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	cfg := srv.StoreConfig()
	stores := make([]*redisStore, 4)
	for i := range stores {
		stores[i] = openRedisAt(t, cfg, time.Now)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() { errs[i] = s.Ping(ctx) })
	}
	wg.Wait()
	e, err := ReadEpoch(ctx, stores[0])
	if err != nil || e.State != EpochNew || e.Token == "" {
		t.Fatalf("epoch of a fresh Redis: %v, %v; want a new one", e, err)
	}
	for i, s := range stores {
		if errs[i] != nil || s.epoch.get() != e.Token {
			t.Errorf("store %d: Ping %v, serves epoch %q; want %q", i, errs[i], s.epoch.get(), e.Token)
		}
	}
}

// TestRedisLossTakenForNewIsCaught: a store that starts on the emptied
// Redis before any running one noticed takes it for a new store (no store
// can tell otherwise); the running store, at its next call, finds an
// epoch it does not know and marks the loss, and stores opened from then
// on refuse.
func TestRedisLossTakenForNewIsCaught(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	cfg := srv.StoreConfig()
	running := openRedisAt(t, cfg, time.Now)
	waitPing(t, running)
	srv.RestartEmpty()
	newcomer := openRedisAt(t, cfg, time.Now)
	if err := newcomer.Ping(ctx); err != nil {
		t.Fatalf("a store starting alone on an empty Redis: %v", err)
	}
	wantLost(t, "Ping of the running store", running.Ping(ctx))
	wantLost(t, "Ping of a store opened afterwards", openRedisAt(t, cfg, time.Now).Ping(ctx))
}

// TestRedisEpochMarkerGarbage: a marker the gateway does not write is
// refused as a loss, and AcceptLoss replaces it.
func TestRedisEpochMarkerGarbage(t *testing.T) {
	ctx := context.Background()
	srv := storetest.StartRedis(t)
	cfg := srv.StoreConfig()
	if _, err := srv.Command("SET", cfg.Redis.KeyPrefix+"epoch", "hello"); err != nil {
		t.Fatal(err)
	}
	s := openRedisAt(t, cfg, time.Now)
	if err := s.Ping(ctx); !errors.Is(err, store.ErrLost) || !strings.Contains(err.Error(), `"hello"`) {
		t.Fatalf("Ping on a foreign marker: %v, want ErrLost naming it", err)
	}
	if _, _, err := AcceptLoss(ctx, unchecked(t, s.cfg)); err != nil {
		t.Fatal(err)
	}
	waitPing(t, s)
}

// TestRedisSentinelFailoverIsNoLoss: through a Sentinel, a failover
// promotes the replica, which has the primary's epoch marker: the store
// goes on (once the switch is over) with the lock still held, and a store
// opened afterwards too. Connections to the Sentinel itself are not
// checked (a Sentinel holds no keys).
func TestRedisSentinelFailoverIsNoLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and a Sentinel")
	}
	ctx := context.Background()
	primary := storetest.StartRedis(t)
	replica := storetest.StartRedisReplica(t, primary)
	sentinel := storetest.StartRedisSentinel(t, primary)
	cfg := primary.StoreConfig()
	cfg.Redis.Addrs, cfg.Redis.MasterName = []string{sentinel.Addr}, storetest.SentinelMaster
	s := openRedisAt(t, cfg, time.Now)
	storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
	before, err := ReadEpoch(ctx, s)
	if err != nil || before.State != EpochNew {
		t.Fatalf("epoch: %v, %v", before, err)
	}

	deadline := time.Now().Add(30 * time.Second)
	for { // NOGOODSLAVE until the Sentinel has heard from the replica itself
		reply, err := sentinel.Command("SENTINEL", "FAILOVER", storetest.SentinelMaster)
		if err == nil && reply == "+OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SENTINEL FAILOVER: %q, %v", reply, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		reply, _ := replica.Command("INFO", "replication")
		_, err := s.Acquire(ctx, storetest.Lock("i1", "owner-2", time.Hour))
		if strings.Contains(reply, "role:master") && errors.Is(err, store.ErrHeld) {
			break
		}
		if errors.Is(err, store.ErrLost) {
			t.Fatalf("Acquire after the failover: %v, want no loss", err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the failover: the replica says %q, Acquire = %v; want it the primary, ErrHeld", reply, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for { // a write: on the new primary, once the client follows it
		_, err := s.Acquire(ctx, storetest.Lock("i2", "owner-1", time.Hour))
		if err == nil {
			break
		}
		if errors.Is(err, store.ErrLost) || time.Now().After(deadline) {
			t.Fatalf("Acquire of a free lock after the failover: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	again := openRedisAt(t, cfg, time.Now)
	if _, err := again.Acquire(ctx, storetest.Lock("i1", "owner-3", time.Hour)); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Acquire through a store opened after the failover: %v, want ErrHeld", err)
	}
	if after, err := ReadEpoch(ctx, again); err != nil || after != before {
		t.Errorf("epoch after the failover: %v, %v; want %v", after, err, before)
	}
}

func TestParseEpoch(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, e := range []Epoch{
		{State: EpochNew, Token: "abc", Since: t0},
		{State: EpochLost, Token: "abc", Since: t0},
		{State: EpochAccepted, Token: "def", Since: t0, Lost: "abc"},
		{State: EpochAccepted, Token: "def", Since: t0},
	} {
		got, ok := parseEpoch(e.marker())
		if !ok || got != e {
			t.Errorf("parseEpoch(%q) = %v, %v; want %v", e.marker(), got, ok, e)
		}
	}
	for _, v := range []string{"", "hello", "new abc", "new abc yesterday", "lost abc 2026-01-02T03:04:05Z x", "gone abc 2026-01-02T03:04:05Z"} {
		if e, ok := parseEpoch(v); ok {
			t.Errorf("parseEpoch(%q) = %v, want no marker", v, e)
		}
	}
}
