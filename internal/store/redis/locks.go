package redis

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The lock methods of the redis backend. Acquire first tries SET NX PX, one
// round trip when the key is free; every other change is a Lua script (sent
// by EVALSHA, EVAL when the server lacks it), so each check-and-change is
// atomic on the server. Scripts compare the record's deadline_us with the
// now the caller passes, so the store's clock decides expiry, not Redis'.

// acquireScript takes KEYS[1] if it is gone, expired or already held by
// owner, and returns {0, record} when it replaced another owner's expired
// lock; otherwise it returns {1, the holder's record}.
// ARGV: record, owner, now µs, TTL ms.
var acquireScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
local took = false
if cur then
  local ok, rec = pcall(cjson.decode, cur)
  if ok and rec.owner ~= ARGV[2] then
    if tonumber(rec.deadline_us) > tonumber(ARGV[3]) then
      return {1, cur}
    end
    took = true
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
if took then return {0, cur} end
return false
`)

// ownedScript replaces (ARGV[1] a record) or deletes (ARGV[1] empty) the
// live lock KEYS[1] if owner holds it. It returns 1 if done, 0 if there is
// no live lock, -1 if another owner holds it.
// ARGV: record or "", owner, now µs, TTL ms.
var ownedScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return 0 end
local rec = cjson.decode(cur)
if tonumber(rec.deadline_us) <= tonumber(ARGV[3]) then return 0 end
if rec.owner ~= ARGV[2] then return -1 end
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[4])
end
return 1
`)

// takeScript deletes and returns KEYS[1] if it is live (ARGV[2] "live") or
// expired (ARGV[2] "expired") at ARGV[1] µs; otherwise it returns nil.
var takeScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then return false end
local ok, rec = pcall(cjson.decode, cur)
local live = ok and tonumber(rec.deadline_us) > tonumber(ARGV[1])
if (ARGV[2] == 'live') == live then
  redis.call('DEL', KEYS[1])
  return cur
end
return false
`)

func us(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

func ms(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }

func (s *redisStore) Acquire(ctx context.Context, l store.Lock) (store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return store.Lock{}, err
	}
	now := s.now()
	l, err := store.PrepareLock(l, now)
	if err != nil {
		return store.Lock{}, err
	}
	k, rec, ttl := s.lockKey(l.Key), store.EncodeLock(l), s.ttl(l, now)
	var set bool
	var res []any
	op := "SET NX"
	err = s.durable(ctx, "acquire", func(c redis.Cmdable) error {
		var err error
		if set, err = c.SetNX(ctx, k, rec, ttl).Result(); err != nil || set {
			return err
		}
		op = "acquire script"
		res, err = acquireScript.Run(ctx, c, []string{k}, rec, l.Owner, us(now), ms(ttl)).Slice()
		if errors.Is(err, redis.Nil) {
			set, err = true, nil
		}
		return err
	})
	if err != nil {
		return store.Lock{}, s.fail(ctx, op, err)
	}
	return acquired(l, set, res)
}

// acquired is Acquire's answer: l taken by SET NX (set), else by the
// acquire script, whose answer res says whether it took l and which lock
// it replaced or found.
func acquired(l store.Lock, set bool, res []any) (store.Lock, error) {
	if set {
		return l, nil
	}
	held, cur, ok := acquireReply(res)
	if !ok {
		return store.Lock{}, fmt.Errorf("%w: lock %s: acquire script answered %v", store.ErrUnavailable, l.Key, res)
	}
	other, err := store.DecodeLock([]byte(cur))
	switch {
	case err != nil && held:
		return store.Lock{}, fmt.Errorf("%w: lock %s: %w", store.ErrUnavailable, l.Key, err)
	case held:
		return other, store.HeldError(other)
	case err == nil:
		l.Replaced = &other // expired: taken over
	}
	return l, nil
}

// AcquireReading sends Acquire's SET NX (or, for a key there, its
// script) and the ZRANGEBYLEX of the instance's member in one pipeline:
// the server runs them in order, so the read comes after the lock is
// taken. On a Cluster the two keys need not share a server, and a
// pipeline over two servers keeps no order: there it is Acquire and then
// GetInstance (store.AcquireThenRead).
func (s *redisStore) AcquireReading(ctx context.Context, l store.Lock) (store.Lock, *store.Instance, error) {
	if _, cluster := s.client.(*redis.ClusterClient); cluster {
		return store.AcquireThenRead(ctx, s, l)
	}
	now := s.now()
	l, err := store.PrepareReading(ctx, l, now)
	if err != nil {
		return store.Lock{}, nil, err
	}
	k, rec, ttl := s.lockKey(l.Key), store.EncodeLock(l), s.ttl(l, now)
	ix, lookup := s.inv(l.Broker).ix, lookupRange(l.InstanceID+"\x00")
	var set bool
	var res []any
	var member []string
	op := "SET NX"
	err = s.durable(ctx, "acquire", func(c redis.Cmdable) error {
		var setNX *redis.BoolCmd
		var read *redis.StringSliceCmd
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			setNX, read = p.SetNX(ctx, k, rec, ttl), p.ZRangeByLex(ctx, ix, lookup)
			return nil
		})
		if err != nil {
			return err
		}
		if set, err = setNX.Result(); err != nil {
			return err
		}
		if !set {
			op = "acquire script"
			var script *redis.Cmd
			script, err = scriptPipelined(ctx, c, acquireScript, []string{k}, []any{rec, l.Owner, us(now), ms(ttl)},
				nil, func(p redis.Pipeliner) { read = p.ZRangeByLex(ctx, ix, lookup) })
			if err != nil && !errors.Is(err, redis.Nil) { // redis.Nil: the script's nil, read below
				return err
			}
			if res, err = script.Slice(); errors.Is(err, redis.Nil) {
				set, err = true, nil
			}
			if err != nil {
				return err
			}
		}
		op = "read the instance"
		member, err = read.Result()
		return err
	})
	if err != nil {
		return store.Lock{}, nil, s.fail(ctx, op, err)
	}
	held, err := acquired(l, set, res)
	if err != nil || len(member) == 0 {
		return held, nil, err
	}
	m, err := store.ParseMember(member[0])
	if err != nil || len(m.Instance) == 0 {
		return held, nil, err
	}
	in, err := store.DecodeInstance(l.Broker, l.InstanceID, m.Instance)
	if err != nil {
		return held, nil, err
	}
	return held, &in, nil
}

// acquireReply reads acquireScript's {flag, record}.
func acquireReply(res []any) (held bool, rec string, ok bool) {
	if len(res) != 2 {
		return false, "", false
	}
	flag, ok1 := res[0].(int64)
	rec, ok2 := res[1].(string)
	return flag == 1, rec, ok1 && ok2
}

// owned runs ownedScript for key and owner: rec replaces the lock, or nil
// deletes it.
func (s *redisStore) owned(ctx context.Context, op, key, owner string, rec []byte, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var res int
	run := func(c redis.Cmdable) error {
		var err error
		res, err = ownedScript.Run(ctx, c, []string{s.lockKey(key)}, rec, owner, us(s.now()), ms(ttl)).Int()
		return err
	}
	var err error
	if rec == nil {
		err = run(s.client) // a release: a lost one leaves a lock that blocks, never one that lets through
	} else {
		err = s.durable(ctx, op, run)
	}
	switch {
	case err != nil:
		return s.fail(ctx, op+" script", err)
	case res == 0:
		return store.NoLock(key)
	case res < 0:
		return fmt.Errorf("%w: lock %s", store.ErrNotOwner, key)
	}
	return nil
}

func (s *redisStore) Update(ctx context.Context, l store.Lock) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := s.now()
	l, err := store.PrepareLock(l, now)
	if err != nil {
		return err
	}
	return s.owned(ctx, "update", l.Key, l.Owner, store.EncodeLock(l), s.ttl(l, now))
}

func (s *redisStore) Release(ctx context.Context, key, owner string) error {
	return s.owned(ctx, "release", key, owner, nil, 0)
}

// take runs takeScript for key: which is "live" or "expired".
func (s *redisStore) take(ctx context.Context, key, which string, now time.Time) (store.Lock, bool, error) {
	cur, err := takeScript.Run(ctx, s.client, []string{s.lockKey(key)}, us(now), which).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Lock{}, false, nil
	case err != nil:
		return store.Lock{}, false, s.fail(ctx, "take script", err)
	}
	l, err := store.DecodeLock([]byte(cur))
	if err != nil {
		return store.Lock{}, false, fmt.Errorf("%w: lock %s: %w", store.ErrUnavailable, key, err)
	}
	return l, true, nil
}

func (s *redisStore) ForceRelease(ctx context.Context, key string) (store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return store.Lock{}, err
	}
	l, ok, err := s.take(ctx, key, "live", s.now())
	return store.FoundLock(l, ok, err, key)
}

func (s *redisStore) Get(ctx context.Context, key string) (store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return store.Lock{}, err
	}
	v, err := s.client.Get(ctx, s.lockKey(key)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return store.Lock{}, store.ErrNotFound // unwrapped, as memory's: Get runs on every poll, and a miss is the common case
	case err != nil:
		return store.Lock{}, s.fail(ctx, "GET", err)
	}
	l, err := store.DecodeLock(v)
	switch {
	case err != nil:
		return store.Lock{}, fmt.Errorf("%w: lock %s: %w", store.ErrUnavailable, key, err)
	case store.Expired(l.Deadline, s.now()):
		return store.Lock{}, store.ErrNotFound
	}
	return l, nil
}

// List SCANs every master: its cost grows with the number of keys in the
// database, which suits an operator's listing, not a request path. With
// f.InstanceID the SCAN MATCHes the instance's key prefix, so the server
// filters and only the instance's locks (and those of instance ids that
// extend its id, dropped before GET) come back.
func (s *redisStore) List(ctx context.Context, f store.ListFilter) ([]store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := f.Check(); err != nil {
		return nil, err
	}
	var prefix string
	var keep func(key string) bool
	if f.InstanceID != "" {
		prefix = store.LockKey(f.Broker, f.InstanceID)
		keep = func(k string) bool { return f.MatchesKey(strings.TrimPrefix(k, s.lockKey(""))) }
	}
	now := s.now()
	var found collect[store.Lock]
	err := s.scanLocks(ctx, prefix, keep, func(values []string) {
		for _, v := range values {
			if l, err := store.DecodeLock([]byte(v)); err == nil && (f.Expired || !store.Expired(l.Deadline, now)) && f.Matches(l) {
				found.add(l)
			}
		}
	})
	if err != nil {
		return nil, s.fail(ctx, "SCAN", err)
	}
	slices.SortFunc(found.items, store.ByKey)
	return found.items, nil
}

// ExpireDue SCANs for locks whose deadline passed, then deletes each with a
// script that checks again, so a lock re-acquired meanwhile stays.
func (s *redisStore) ExpireDue(ctx context.Context, now time.Time) ([]store.Lock, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var due collect[string]
	err := s.scanLocks(ctx, "", nil, func(values []string) {
		for _, v := range values {
			if l, err := store.DecodeLock([]byte(v)); err == nil && store.Expired(l.Deadline, now) {
				due.add(l.Key)
			}
		}
	})
	if err != nil {
		return nil, s.fail(ctx, "SCAN", err)
	}
	var out []store.Lock
	for _, key := range due.items {
		l, ok, err := s.take(ctx, key, "expired", now)
		if err != nil {
			return out, err
		}
		if ok {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, store.ByDeadline)
	return out, nil
}
