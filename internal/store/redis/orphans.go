package redis

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The orphan queue of the redis backend: a hash of records by ID and a
// sorted set of IDs scored by NextAttempt in microseconds (exact in a
// float64 until the year 2255). Writes to both go in one MULTI/EXEC. A
// claim lives in the record (claimed_by, claimed_until, claimed_until_us);
// records written before claims existed lack those fields: unclaimed.

// dueScript returns the records of up to ARGV[2] (0: all) orphans whose
// score is at most ARGV[1] and that have no claim live at ARGV[1] µs, by
// score then ID. It reads the set a page at a time, so that orphans skipped
// as claimed (or gone from the hash) do not count against the limit. A
// record that does not decode is returned, for the caller to report.
// KEYS: due set, hash.
var dueScript = redis.NewScript(`
local now, limit = tonumber(ARGV[1]), tonumber(ARGV[2])
local out, offset = {}, 0
while true do
  local ids
  if limit > 0 then
    ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', offset, limit)
  else
    ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
  end
  for _, id in ipairs(ids) do
    local cur = redis.call('HGET', KEYS[2], id)
    if cur then
      local ok, rec = pcall(cjson.decode, cur)
      if not ok or not (rec.claimed_until_us and tonumber(rec.claimed_until_us) > now) then
        out[#out + 1] = cur
        if #out == limit then return out end
      end
    end
  end
  if limit <= 0 or #ids < limit then return out end
  offset = offset + #ids
end
`)

// claimScript claims orphan ARGV[1] of hash KEYS[1] for ARGV[2] until
// ARGV[3] (RFC 3339) = ARGV[4] µs unless another claimant's claim is live
// at ARGV[5] µs. It returns {1, new record} when claimed, {-1, record} when
// held, {0} when there is no such orphan, {-2, record} when the record does
// not decode. The record is decoded and re-encoded by cjson: key order and
// escapes change, values do not (claimed_until_us is a string; the only
// number, attempts, is small).
var claimScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if not cur then return {0} end
local ok, rec = pcall(cjson.decode, cur)
if not ok or type(rec) ~= 'table' then return {-2, cur} end
if rec.claimed_by ~= ARGV[2] and rec.claimed_until_us and tonumber(rec.claimed_until_us) > tonumber(ARGV[5]) then
  return {-1, cur}
end
rec.claimed_by, rec.claimed_until, rec.claimed_until_us = ARGV[2], ARGV[3], ARGV[4]
local new = cjson.encode(rec)
redis.call('HSET', KEYS[1], ARGV[1], new)
return {1, new}
`)

func (s *redisStore) PutOrphan(ctx context.Context, o store.Orphan) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o, err := store.PrepareOrphan(o, s.now())
	if err != nil {
		return err
	}
	err = s.durable(ctx, "put orphan", func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.HSet(ctx, s.orphansKey(), o.ID, store.EncodeOrphan(o))
			p.ZAdd(ctx, s.orphanDueKey(), redis.Z{Score: float64(o.NextAttempt.UnixMicro()), Member: o.ID})
			return nil
		})
		return err
	})
	return s.fail(ctx, "put orphan", err)
}

func (s *redisStore) GetOrphan(ctx context.Context, id string) (store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return store.Orphan{}, err
	}
	v, err := s.client.HGet(ctx, s.orphansKey(), id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Orphan{}, store.NoOrphan(id)
	case err != nil:
		return store.Orphan{}, s.fail(ctx, "HGET", err)
	}
	o, err := store.DecodeOrphan(v)
	if err != nil {
		return store.Orphan{}, fmt.Errorf("%w: orphan %s: %w", store.ErrUnavailable, id, err)
	}
	return o, nil
}

// ListOrphans reads the whole hash in one HGETALL: the queue holds what
// brokers failed to clean up, hundreds rather than millions.
func (s *redisStore) ListOrphans(ctx context.Context) ([]store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := s.client.HGetAll(ctx, s.orphansKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, "HGETALL", err)
	}
	var out []store.Orphan
	for _, id := range slices.Sorted(maps.Keys(all)) {
		o, err := store.DecodeOrphan([]byte(all[id]))
		if err != nil {
			return nil, fmt.Errorf("%w: orphan %s: %w", store.ErrUnavailable, id, err)
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
	// Durable: a deletion a promoted replica lacked would bring back the
	// orphan of an instance the platform was since told exists (a
	// provision's success cancels it), and the mitigator would delete it.
	err := s.durable(ctx, "delete orphan", func(c redis.Cmdable) error {
		_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
			del = p.HDel(ctx, s.orphansKey(), id)
			p.ZRem(ctx, s.orphanDueKey(), id)
			return nil
		})
		return err
	})
	switch {
	case err != nil:
		return s.fail(ctx, "delete orphan", err)
	case del.Val() == 0:
		return store.NoOrphan(id)
	}
	return nil
}

func (s *redisStore) DueOrphans(ctx context.Context, now time.Time, limit int) ([]store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	keys := []string{s.orphanDueKey(), s.orphansKey()}
	res, err := dueScript.Run(ctx, s.client, keys, us(now), strconv.Itoa(max(limit, 0))).Slice()
	if err != nil {
		return nil, s.fail(ctx, "due orphans script", err)
	}
	var out []store.Orphan
	for _, v := range res {
		rec, _ := v.(string)
		o, err := store.DecodeOrphan([]byte(rec))
		if err != nil {
			return nil, fmt.Errorf("%w: due orphan: %w", store.ErrUnavailable, err)
		}
		out = append(out, o)
	}
	return out, nil
}

// ClaimOrphan is one claimScript call: one round trip, atomic on the
// server, on the one slot of the orphans hash.
func (s *redisStore) ClaimOrphan(ctx context.Context, id, claimant string, until time.Time) (store.Orphan, error) {
	if err := ctx.Err(); err != nil {
		return store.Orphan{}, err
	}
	now := s.now()
	until, err := store.PrepareClaim(id, claimant, until, now)
	if err != nil {
		return store.Orphan{}, err
	}
	res, err := claimScript.Run(ctx, s.client, []string{s.orphansKey()},
		id, claimant, until.Format(time.RFC3339Nano), us(until), us(now)).Slice()
	if err != nil {
		return store.Orphan{}, s.fail(ctx, "claim orphan script", err)
	}
	var code int64
	var rec string
	if len(res) > 0 {
		code, _ = res[0].(int64)
	}
	if len(res) > 1 {
		rec, _ = res[1].(string)
	}
	if code == 0 {
		return store.Orphan{}, store.NoOrphan(id)
	}
	o, err := store.DecodeOrphan([]byte(rec))
	if err == nil && code == -2 {
		err = errors.New("the claim script cannot decode the record")
	}
	switch {
	case err != nil:
		return store.Orphan{}, fmt.Errorf("%w: orphan %s: %w", store.ErrUnavailable, id, err)
	case code < 0:
		return o, store.OrphanHeld(o)
	}
	return o, nil
}
