// Package redis is the "redis" backend of internal/store, shared by the
// gateway's replicas: standalone Redis, Sentinel or Cluster through
// go-redis' universal client, as store.RedisConfig describes. Every
// change is one Lua script or transaction on one slot. It passes
// storetest.Contract, like every backend, on a standalone server and on a
// Cluster. In this package, redis names github.com/redis/go-redis/v9.
package redis

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Keys of the redis backend, all starting with RedisConfig.KeyPrefix:
//
//	<prefix>lock:<lock key>     string: lockRecord JSON, TTL = time to Deadline + RedisTTLMargin
//	<prefix>{orphans}           hash:   orphan id -> orphanRecord JSON
//	<prefix>{orphans}:due       sorted set: orphan id scored by NextAttempt (µs since 1970)
//	<prefix>session:<hex>       string: a console session (session.go), TTL = time to Expires + RedisTTLMargin
//	<prefix>epoch               string: the marker of the store's data (epoch.go), no TTL
//
// Cluster: each lock is one key and every lock operation touches only that
// key, so locks spread over the cluster's slots; List and ExpireDue SCAN
// every master (ClusterClient.ForEachMaster) rather than keep an index that
// would pin all locks to one slot. The two orphan keys share the hash tag
// {orphans}, so the transactions and the script that touch both run on one
// node. (A KeyPrefix with its own hash tag puts every key in one slot.)

// redisMaxRetries, redisMaxRetryBackoff and redisDialAttempts keep
// go-redis from retrying long against a server that is down (by default it
// dials 5 times per try and tries 4 times): one retry replaces a connection
// the server closed (after a restart), and a call fails within about two
// dial or read timeouts, so the caller can answer "unavailable" quickly.
const (
	redisMaxRetries      = 1
	redisMaxRetryBackoff = 50 * time.Millisecond
	redisDialAttempts    = 1
	redisScanCount       = 1000 // keys per SCAN call
	redisMaxTTL          = 100 * 365 * 24 * time.Hour
)

// redisStore is the "redis" backend, shared by every replica using the same
// Redis and KeyPrefix.
type redisStore struct {
	client redis.UniversalClient
	now    func() time.Time
	prefix string
	cfg    store.RedisConfig // as opened, defaults applied

	epoch     epochState // the epoch this store serves (epoch.go)
	unchecked bool       // OpenUnchecked's: connections do not check the epoch
}

// Open returns a Store on the Redis cfg describes, taken as it is
// (backend.Open applies store.Config's defaults first). now is the store's
// clock (nil means time.Now); it decides which locks have expired. Open
// does not connect yet (like sql.Open): call Ping to check that Redis can
// be reached. Each connection checks first that Redis still holds the
// data the store knew (epoch.go): once it lost them, every call fails with
// store.ErrLost until an operator accepts the loss (AcceptLoss).
func Open(cfg store.RedisConfig, now func() time.Time) (store.Store, error) {
	return openAs(cfg, now, false)
}

// OpenUnchecked is Open for the operator's recovery of a Redis that lost
// the gateway's state: its connections do not check the epoch marker, so
// it reads and writes (an inventory import, AcceptLoss) while the
// gateways' stores refuse. Nothing else should use it.
func OpenUnchecked(cfg store.RedisConfig, now func() time.Time) (store.Store, error) {
	return openAs(cfg, now, true)
}

func openAs(cfg store.RedisConfig, now func() time.Time, unchecked bool) (store.Store, error) {
	if now == nil {
		now = time.Now
	}
	s, err := open(cfg, now, unchecked)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// open is Open, returning the backend's own type.
func open(c store.RedisConfig, now func() time.Time, unchecked bool) (*redisStore, error) {
	s := &redisStore{now: now, prefix: c.KeyPrefix, cfg: c, unchecked: unchecked}
	opts := &redis.UniversalOptions{
		Addrs:                 c.Addrs,
		ClientName:            "osb-gateway",
		Username:              c.Username,
		Password:              c.Password,
		DB:                    c.DB,
		MasterName:            c.MasterName,
		DialTimeout:           c.DialTimeout,
		ReadTimeout:           c.ReadTimeout,
		WriteTimeout:          c.WriteTimeout,
		ContextTimeoutEnabled: true,
		MaxRetries:            redisMaxRetries,
		MaxRetryBackoff:       redisMaxRetryBackoff,
		DialerRetries:         redisDialAttempts,
		// The gateway has no use for server maintenance push notices.
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
		OnConnect:                s.checkEpoch,
	}
	if c.TLS {
		opts.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	s.client = redis.NewUniversalClient(opts)
	return s, nil
}

func (s *redisStore) lockKey(key string) string { return s.prefix + "lock:" + key }
func (s *redisStore) orphansKey() string        { return s.prefix + "{orphans}" }
func (s *redisStore) orphanDueKey() string      { return s.prefix + "{orphans}:due" }

// fail maps an error of a go-redis call: the context's error if it ended,
// otherwise a failure of the backend. Server error replies count as
// failures of the backend too: the store's own outcomes (ErrHeld and the
// like) come back from scripts as values, never as errors.
func (s *redisStore) fail(ctx context.Context, op string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	if errors.Is(err, redis.ErrClosed) {
		return store.ErrClosed
	}
	if errors.Is(err, store.ErrUnavailable) { // durable's: described already
		return err
	}
	return fmt.Errorf("%w: redis %s: %w", store.ErrUnavailable, op, err)
}

// durable runs write, a write a promise rests on (a lock's acquire or
// update, an inventory record or its removal, an orphan). With replica
// acknowledgements (RedisConfig.ReplicaAcks) it runs on one connection of
// its own, and then WAITs on that same connection (WAIT counts the writes
// of the connection it is sent on) until as many replicas acknowledged
// them: a Sentinel failover then promotes a replica that has the write.
// Not acknowledged within ReplicaAckTimeout, the write is ErrUnavailable,
// the answer of a store that does not answer, though it may have been
// applied on the primary: callers already treat an unconfirmed write so
// (the guard releases an unconfirmed lock by its owner token). Without
// acknowledgements write runs on the pooled client, as it always did.
// write returns the error of its commands as go-redis gave it; op names
// the write.
func (s *redisStore) durable(ctx context.Context, op string, write func(c redis.Cmdable) error) error {
	if s.cfg.ReplicaAcks <= 0 {
		return write(s.client)
	}
	c, ok := s.client.(*redis.Client)
	if !ok { // configuration refuses it: a Cluster's writes go to several primaries
		return fmt.Errorf("%w: redis %s: replica acknowledgements need a standalone or Sentinel Redis", store.ErrUnavailable, op)
	}
	conn := c.Conn()
	defer conn.Close()
	if err := write(conn); err != nil {
		return err
	}
	n, err := conn.Wait(ctx, s.cfg.ReplicaAcks, s.cfg.ReplicaAckTimeout).Result()
	if err != nil {
		return s.fail(ctx, op+" WAIT", err)
	}
	if n < int64(s.cfg.ReplicaAcks) {
		return fmt.Errorf("%w: redis %s: %d of the %d replicas asked for (state.redis.replica_acks) acknowledged the write within %s",
			store.ErrUnavailable, op, n, s.cfg.ReplicaAcks, s.cfg.ReplicaAckTimeout)
	}
	return nil
}

// ttl is the TTL of a lock key: the time to l's Deadline plus the margin,
// capped at redisMaxTTL so that the sum cannot overflow.
func (s *redisStore) ttl(l store.Lock, now time.Time) time.Duration {
	return min(l.Deadline.Sub(now), redisMaxTTL).Truncate(time.Millisecond) + store.RedisTTLMargin
}

func (s *redisStore) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return s.fail(ctx, "PING", s.client.Ping(ctx).Err())
}

func (s *redisStore) Close() error {
	if err := s.client.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("store: close redis client: %w", err)
	}
	return nil
}

// scanLocks calls fn with every page of the values of the lock keys that
// start with s.lockKey(prefix) and pass keep (nil keeps all), on every
// master; a value is "" for a key gone between SCAN and GET. fn may be
// called from several goroutines at once.
func (s *redisStore) scanLocks(ctx context.Context, prefix string, keep func(key string) bool,
	fn func(values []string)) error {
	pattern := globEscape(s.lockKey(prefix)) + "*"
	scan := func(ctx context.Context, c *redis.Client) error {
		var cursor uint64
		for {
			keys, next, err := c.Scan(ctx, cursor, pattern, redisScanCount).Result()
			if err != nil {
				return err
			}
			if keep != nil {
				keys = slices.DeleteFunc(keys, func(k string) bool { return !keep(k) })
			}
			if len(keys) > 0 {
				values, err := getAll(ctx, c, keys)
				if err != nil {
					return err
				}
				fn(values)
			}
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, scan)
	case *redis.Client:
		return scan(ctx, c)
	default:
		return fmt.Errorf("redis client %T not supported", c)
	}
}

// getAll GETs keys in one pipeline (not MGET: a Cluster node refuses MGET
// across slots).
func getAll(ctx context.Context, c *redis.Client, keys []string) ([]string, error) {
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	values := make([]string, len(keys))
	for i, cmd := range cmds {
		values[i] = cmd.Val()
	}
	return values, nil
}

// collect gathers what concurrent scanLocks callbacks produce.
type collect[T any] struct {
	mu    sync.Mutex
	items []T
}

func (c *collect[T]) add(v T) {
	c.mu.Lock()
	c.items = append(c.items, v)
	c.mu.Unlock()
}

// globEscape quotes the SCAN MATCH metacharacters in s.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ServerTime is the Redis server's clock (TIME): the clock the replicas
// sharing it set and judge deadlines by (store.ServerClock).
func (s *redisStore) ServerTime(ctx context.Context) (time.Time, error) {
	t, err := s.client.Time(ctx).Result()
	if err != nil {
		return time.Time{}, s.fail(ctx, "TIME", err)
	}
	return t, nil
}
