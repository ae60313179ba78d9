package store

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The orphan queue of the redis backend: a hash of records by ID and a
// sorted set of IDs scored by NextAttempt in microseconds (exact in a
// float64 until the year 2255). Writes to both go in one MULTI/EXEC.

// dueScript returns the records of up to ARGV[2] (0: all) orphans whose
// score is at most ARGV[1], by score then ID; a record gone is nil.
// KEYS: due set, hash.
var dueScript = redis.NewScript(`
local ids
if tonumber(ARGV[2]) > 0 then
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
else
  ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
end
local out = {}
for i, id in ipairs(ids) do
  out[i] = redis.call('HGET', KEYS[2], id)
end
return out
`)

func (s *redisStore) PutOrphan(ctx context.Context, o Orphan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := prepareOrphan(o, s.now())
	if err != nil {
		return err
	}
	_, err = s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.HSet(ctx, s.orphansKey(), o.ID, encodeOrphan(o))
		p.ZAdd(ctx, s.orphanDueKey(), redis.Z{Score: float64(o.NextAttempt.UnixMicro()), Member: o.ID})
		return nil
	})
	return s.fail(ctx, "put orphan", err)
}

func (s *redisStore) GetOrphan(ctx context.Context, id string) (Orphan, error) {
	if err := ctx.Err(); err != nil {
		return Orphan{}, err
	}
	v, err := s.client.HGet(ctx, s.orphansKey(), id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return Orphan{}, fmt.Errorf("%w: orphan %s", ErrNotFound, id)
	case err != nil:
		return Orphan{}, s.fail(ctx, "HGET", err)
	}
	o, err := decodeOrphan(v)
	if err != nil {
		return Orphan{}, fmt.Errorf("%w: orphan %s: %w", ErrUnavailable, id, err)
	}
	return o, nil
}

// ListOrphans reads the whole hash in one HGETALL: the queue holds what
// brokers failed to clean up, hundreds rather than millions.
func (s *redisStore) ListOrphans(ctx context.Context) ([]Orphan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := s.client.HGetAll(ctx, s.orphansKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, "HGETALL", err)
	}
	var out []Orphan
	for _, id := range slices.Sorted(maps.Keys(all)) {
		o, err := decodeOrphan([]byte(all[id]))
		if err != nil {
			return nil, fmt.Errorf("%w: orphan %s: %w", ErrUnavailable, id, err)
		}
		out = append(out, o)
	}
	return out, nil
}

func (s *redisStore) DeleteOrphan(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var del *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, s.orphansKey(), id)
		p.ZRem(ctx, s.orphanDueKey(), id)
		return nil
	})
	switch {
	case err != nil:
		return s.fail(ctx, "delete orphan", err)
	case del.Val() == 0:
		return fmt.Errorf("%w: orphan %s", ErrNotFound, id)
	}
	return nil
}

func (s *redisStore) DueOrphans(ctx context.Context, now time.Time, limit int) ([]Orphan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys := []string{s.orphanDueKey(), s.orphansKey()}
	res, err := dueScript.Run(ctx, s.client, keys, us(now), strconv.Itoa(max(limit, 0))).Slice()
	if err != nil {
		return nil, s.fail(ctx, "due orphans script", err)
	}
	var out []Orphan
	for _, v := range res {
		rec, ok := v.(string)
		if !ok { // deleted from the hash but not the set: skip it
			continue
		}
		o, err := decodeOrphan([]byte(rec))
		if err != nil {
			return nil, fmt.Errorf("%w: due orphan: %w", ErrUnavailable, err)
		}
		out = append(out, o)
	}
	return out, nil
}
