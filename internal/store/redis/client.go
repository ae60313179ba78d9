package redis

import (
	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// ClientOf returns the go-redis client and the key prefix of a store
// opened with store.BackendRedis, so that what replicas share beside the store
// (the rate limits of limits.scope: cluster) uses the same connection
// pool, settings and key namespace; ok is false for the other backends.
// The client belongs to st: callers must not close it, and it fails with
// redis.ErrClosed once st is closed.
func ClientOf(st store.Store) (client redis.UniversalClient, keyPrefix string, ok bool) {
	r, ok := st.(*redisStore)
	if !ok {
		return nil, "", false
	}
	return r.client, r.prefix, true
}
