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
// PostgreSQL it then creates or migrates the schema. For a store that
// replicas share it also returns the clock the gateway runs on, the
// store server's (store.ServerClock), read once here (runClock keeps
// reading it); for bolt and memory, nil: the gateway runs on
// gatewayClock.
func openStore(sc config.State, log *slog.Logger) (store.Store, *store.ServerClock, error) {
	return openStoreOn(sc, log, gatewayClock)
}

// openStoreOn is openStore on the machine's clock local.
func openStoreOn(sc config.State, log *slog.Logger, local func() time.Time) (store.Store, *store.ServerClock, error) {
	var clk *store.ServerClock
	now := local
	if sc.Backend == store.BackendRedis || sc.Backend == store.BackendPostgres {
		clk = store.NewServerClock(local)
		now = clk.Now
	}
	st, err := backend.Open(storeConfig(sc), now)
	if err != nil {
		return nil, nil, fmt.Errorf("state (%s): %w", sc.Backend, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = st.Ping(ctx)
	if err == nil && sc.Backend == store.BackendPostgres {
		err = postgres.Migrate(ctx, st) // under an advisory lock: replicas starting together wait for each other
	}
	if clk != nil {
		if src, ok := st.(store.ServerTimer); ok {
			clk.Follow(src)
		}
		clk.OnStep = func(step time.Duration) {
			log.Warn("the state store's clock moved; the gateway follows it", slog.String("step", step.String()))
		}
		if err == nil {
			err = clk.Sync(ctx)
		}
	}
	if err != nil {
		log.Warn("operation state unavailable at start; mutating calls get 503 until it answers",
			slog.String("backend", sc.Backend), slog.String("error", err.Error()))
	}
	return st, clk, nil
}

// nowOf is the gateway's clock: clk's (a shared store's server), or
// gatewayClock when clk is nil.
func nowOf(clk *store.ServerClock) func() time.Time {
	if clk == nil {
		return gatewayClock
	}
	return clk.Now
}

// runClock keeps clk on the server's clock until ctx ends (nothing for a
// nil clk), logging a read that fails once until one succeeds again.
func runClock(ctx context.Context, clk *store.ServerClock, log *slog.Logger) {
	if clk == nil {
		return
	}
	var failing atomic.Bool
	clk.Run(ctx, func(err error) {
		if failing.CompareAndSwap(false, true) {
			log.Warn("cannot read the state store's clock; the gateway's runs on from the last reading",
				slog.String("error", err.Error()))
		}
	}, func() { failing.Store(false) })
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
