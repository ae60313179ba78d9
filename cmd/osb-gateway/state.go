package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/postgres"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// openStore opens the operation-state backend of the state section and,
// for Redis and PostgreSQL, checks that it answers (a gateway that cannot
// reach its state refuses mutating calls, so it says so at start); for
// PostgreSQL it then creates or migrates the schema.
func openStore(sc config.State, log *slog.Logger) (store.Store, error) {
	st, err := backend.Open(storeConfig(sc), gatewayClock)
	if err != nil {
		return nil, fmt.Errorf("state (%s): %w", sc.Backend, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = st.Ping(ctx)
	if err == nil && sc.Backend == store.BackendPostgres {
		err = postgres.Migrate(ctx, st) // under an advisory lock: replicas starting together wait for each other
	}
	if err != nil {
		log.Warn("operation state unavailable at start; mutating calls get 503 until it answers",
			slog.String("backend", sc.Backend), slog.String("error", err.Error()))
	}
	return st, nil
}

// storeConfig is the store configuration of the state section.
func storeConfig(sc config.State) store.Config {
	return store.Config{Backend: sc.Backend, Path: sc.Path, Redis: store.RedisConfig{
		Addrs: sc.Redis.Addrs, Username: sc.Redis.Username, Password: sc.Redis.Password.Reveal(), DB: sc.Redis.DB,
		MasterName: sc.Redis.MasterName, KeyPrefix: sc.Redis.KeyPrefix, DialTimeout: sc.Redis.DialTimeout,
		ReadTimeout: sc.Redis.ReadTimeout, WriteTimeout: sc.Redis.WriteTimeout, TLS: sc.Redis.TLS,
		ReplicaAcks: sc.Redis.ReplicaAcks, ReplicaAckTimeout: sc.Redis.ReplicaAckTimeout,
	}, Postgres: store.PostgresConfig{
		URL: sc.Postgres.URL.Reveal(), MaxConns: int32(sc.Postgres.MaxConns),
		StatementTimeout: sc.Postgres.StatementTimeout, ConnectTimeout: sc.Postgres.ConnectTimeout,
	}}
}

// sweep releases expired operation locks and polls the async operations
// nobody settled (proxy.Gateway.SweepOperations) every interval, and works
// the orphan-mitigation queue every proxy.OrphanTick, until ctx ends. A
// sweep runs beside the queue, since its polls may wait on a slow broker:
// a tick that finds the previous sweep still running skips it.
func sweep(ctx context.Context, sw *proxy.Switch, interval time.Duration) {
	locks := time.NewTicker(interval)
	defer locks.Stop()
	orphans := time.NewTicker(proxy.OrphanTick)
	defer orphans.Stop()
	var (
		sweeping sync.WaitGroup
		busy     atomic.Bool
	)
	defer sweeping.Wait()
	for {
		select {
		case <-ctx.Done():
			return
		case <-locks.C:
			if busy.CompareAndSwap(false, true) {
				sweeping.Go(func() {
					defer busy.Store(false)
					sw.Load().SweepOperations(ctx)
				})
			}
		case <-orphans.C:
			sw.Load().MitigateOrphans(ctx)
		}
	}
}
