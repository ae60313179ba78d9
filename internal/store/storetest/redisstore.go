package storetest

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// What the tests of the redis backend, and of what is built on it, share
// beside the server.

// prefixes makes each test Store's KeyPrefix unique on a shared server.
var prefixes atomic.Int64

// StoreConfig is a store.Config for r with a fresh KeyPrefix and patient
// timeouts: a loaded machine may take a while to answer a pipeline, and
// the tests of a hanging server set their own.
func (r *Redis) StoreConfig() store.Config {
	return store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{
		Addrs:       []string{r.Addr},
		KeyPrefix:   fmt.Sprintf("test%d:", prefixes.Add(1)),
		DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	}}
}

// RoundTrips is a go-redis hook that counts what a client sends: one per
// command, one per pipeline or transaction.
type RoundTrips struct {
	// N is the count so far; a test may reset it.
	N atomic.Int64
}

// DialHook leaves dialling alone.
func (r *RoundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook counts a command.
func (r *RoundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.N.Add(1)
		return next(ctx, cmd)
	}
}

// ProcessPipelineHook counts a pipeline or a transaction.
func (r *RoundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		r.N.Add(1)
		return next(ctx, cmds)
	}
}
