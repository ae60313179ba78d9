// Package backend opens the state store a store.Config names. It is the
// one package that knows every backend (bolt, redis, postgres, memory); they know
// only the contract in internal/store, and not each other.
package backend

import (
	"fmt"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/bolt"
	"github.com/osb-gateway/osb-gateway/internal/store/memory"
	"github.com/osb-gateway/osb-gateway/internal/store/postgres"
	"github.com/osb-gateway/osb-gateway/internal/store/redis"
)

// Open returns the Store cfg describes, with defaults applied to its zero
// fields (store.Config.WithDefaults). now is the store's clock (nil means
// time.Now); it decides which locks have expired. Opening a bolt file
// another process holds fails after OpenTimeout with an error wrapping
// store.ErrUnavailable. Opening redis or postgres does not connect yet (like sql.Open):
// call Ping to check it can be reached.
func Open(cfg store.Config, now func() time.Time) (store.Store, error) {
	if now == nil {
		now = time.Now
	}
	cfg = cfg.WithDefaults()
	switch cfg.Backend {
	case store.BackendMemory:
		return memory.New(now), nil
	case store.BackendBolt:
		return bolt.Open(cfg.Path, cfg.OpenTimeout, now)
	case store.BackendRedis:
		return redis.Open(cfg.Redis, now)
	case store.BackendPostgres:
		return postgres.Open(cfg.Postgres, now)
	default:
		return nil, fmt.Errorf("store: unknown backend %q (want %q, %q, %q or %q)",
			cfg.Backend, store.BackendBolt, store.BackendRedis, store.BackendPostgres, store.BackendMemory)
	}
}
