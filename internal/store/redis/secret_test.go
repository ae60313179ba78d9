package redis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// redisReveals reports whether any key under prefix, or any value, member
// or field of one, shows the marker.
func redisReveals(t *testing.T, raw *redis.Client, prefix string) bool {
	ctx := context.Background()
	keys, err := raw.Keys(ctx, prefix+"*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("KEYS %s* = %v, %v", prefix, keys, err)
	}
	found := false
	see := func(vs ...string) {
		for _, v := range vs {
			found = found || storetest.RevealsSecret([]byte(v))
		}
	}
	for _, k := range keys {
		see(k)
		switch typ := raw.Type(ctx, k).Val(); typ {
		case "string":
			see(raw.Get(ctx, k).Val())
		case "hash":
			for f, v := range raw.HGetAll(ctx, k).Val() {
				see(f, v)
			}
		case "zset":
			see(raw.ZRange(ctx, k, 0, -1).Val()...)
		case "set":
			see(raw.SMembers(ctx, k).Val()...)
		default:
			t.Fatalf("key %q has type %q, which the scan does not read", k, typ)
		}
	}
	return found
}

func TestSecretMarkerRedis(t *testing.T) {
	keys := storetest.SecretKeys(t)
	srv := storetest.StartRedis(t)
	raw := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer raw.Close()
	for _, leak := range []bool{false, true} {
		s := openRedisAt(t, srv.StoreConfig(), osbtest.NewClock(storetest.T0).Now)
		storetest.PutSecrets(t, s, keys, leak)
		// A lock and an orphan beside the inventory, so the scan covers
		// every kind of key the store writes.
		storetest.MustAcquire(t, s, storetest.Lock("i1", "owner-1", time.Hour))
		if err := s.PutOrphan(context.Background(), storetest.Orphan("o1", storetest.T0)); err != nil {
			t.Fatal(err)
		}
		if got := redisReveals(t, raw, s.prefix); got != leak {
			t.Errorf("with the marker in plain text %t: Redis shows it: %t", leak, got)
		}
	}
}
