package redis

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The console sessions of the redis backend:
//
//	<prefix>session:<key hex>  string: the encoded session, TTL = time to Expires + RedisTTLMargin
//
// The key is the SHA-256 of the session id, never the id. The stored
// Expires is the truth (by the store's clock, as for locks); the TTL only
// removes the key of an expired session by itself.

func (s *redisStore) sessionKey(k store.SessionKey) string { return s.prefix + "session:" + k.String() }

func (s *redisStore) PutSession(ctx context.Context, k store.SessionKey, se store.Session) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	se, enc, err := store.PrepareSession(se, now)
	if err != nil {
		return err
	}
	ttl := min(se.Expires.Sub(now), redisMaxTTL).Truncate(time.Millisecond) + store.RedisTTLMargin
	return s.fail(ctx, "SET session", s.client.Set(ctx, s.sessionKey(k), enc, ttl).Err())
}

func (s *redisStore) GetSession(ctx context.Context, k store.SessionKey) (store.Session, error) {
	if err := ctx.Err(); err != nil {
		return store.Session{}, err
	}
	v, err := s.client.Get(ctx, s.sessionKey(k)).Bytes()
	if err != nil && !errors.Is(err, redis.Nil) {
		return store.Session{}, s.fail(ctx, "GET session", err)
	}
	return store.LiveSession(k, v, err == nil, s.now())
}

func (s *redisStore) DeleteSession(ctx context.Context, k store.SessionKey) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := s.durable(ctx, "DEL session", func(c redis.Cmdable) error { return c.Del(ctx, s.sessionKey(k)).Err() })
	return s.fail(ctx, "DEL session", err)
}
