package store

import (
	"context"
	"errors"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The inventory of the redis backend. Keys, after RedisConfig.KeyPrefix:
//
//	inv:brokers       set: the brokers with an inventory
//	inv:{B}:i         hash: instance id -> instance record (inventory_codec.go)
//	inv:{B}:ix        sorted set, scores 0: instance ids, in byte order
//	inv:{B}:tx        sorted set, scores 0: tenant NUL instance id, for instances with a tenant
//	inv:{B}:b         hash: instance id NUL binding id -> binding record
//	inv:{B}:bx        sorted set, scores 0: instance id NUL binding id
//	inv:{B}:ex        sorted set: instance id NUL binding id, scored by the
//	                  binding's ExpiresAt in microseconds (bindings with one)
//
// where B is the broker name with "%", "{" and "}" percent-encoded, so
// that the hash tag {B} is never cut short and every key of one broker is
// on one Cluster slot: each write is one Lua script over that broker's
// keys, atomic, and brokers spread over the cluster (one broker's
// inventory stays on one master).
//
// Cost: get, put and delete of one record are one round trip and O(log n)
// on the server (HGET; a script doing HSET/HDEL and ZADD/ZREM), never a
// SCAN. A page of a listing is one script per broker (ZRANGEBYLEX with
// LIMIT, then HGET per record: O(log n + page)), after one SMEMBERS of
// inv:brokers when no broker is named. Counts are HLEN, ZCARD or ZLEXCOUNT
// per broker. The sorted sets cost memory beside the hashes: about 100
// bytes per instance for ix, as much again in tx (see the README's
// figures).
//
// The put script reads the tenant of the record it replaces from the
// record's fixed head (version byte, tenant length byte, tenant) to move
// the tx entry: the only part of the binary layout a script reads.

// putInstanceScript stores ARGV[2] as instance ARGV[1] with tenant ARGV[3]
// unless it exists and ARGV[4] is not "1"; it returns 1 if it stored, 0
// if it kept the existing record. KEYS: i, ix, tx.
var putInstanceScript = redis.NewScript(`
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  if ARGV[4] ~= '1' then return 0 end
  local n = string.byte(old, 2)
  if n and n > 0 then redis.call('ZREM', KEYS[3], string.sub(old, 3, 2 + n) .. '\0' .. ARGV[1]) end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
if ARGV[3] ~= '' then redis.call('ZADD', KEYS[3], 0, ARGV[3] .. '\0' .. ARGV[1]) end
return 1
`)

// putBindingScript stores ARGV[2] as binding ARGV[1] (instance NUL
// binding) unless it exists and ARGV[3] is not "1", and scores it ARGV[4]
// in ex (or takes it out where ARGV[4] is ""); 1 if stored, else 0.
// KEYS: b, bx, ex.
var putBindingScript = redis.NewScript(`
if ARGV[3] ~= '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
if ARGV[4] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
else
  redis.call('ZREM', KEYS[3], ARGV[1])
end
return 1
`)

// deleteInstanceScript deletes instance ARGV[1] and its bindings. It
// returns false if there was neither, else {instance record or "",
// binding member, binding record, ...}. KEYS: i, ix, tx, b, bx, ex.
var deleteInstanceScript = redis.NewScript(`
local id = ARGV[1]
local old = redis.call('HGET', KEYS[1], id)
local lo, hi = '[' .. id .. '\0', '(' .. id .. '\1'
local members = redis.call('ZRANGEBYLEX', KEYS[5], lo, hi)
if not old and #members == 0 then return false end
local out = {old or ''}
for _, m in ipairs(members) do
  local rec = redis.call('HGET', KEYS[4], m)
  if rec then
    out[#out + 1] = m
    out[#out + 1] = rec
    redis.call('HDEL', KEYS[4], m)
  end
  redis.call('ZREM', KEYS[6], m)
end
if #members > 0 then redis.call('ZREMRANGEBYLEX', KEYS[5], lo, hi) end
if old then
  local n = string.byte(old, 2)
  if n and n > 0 then redis.call('ZREM', KEYS[3], string.sub(old, 3, 2 + n) .. '\0' .. id) end
  redis.call('HDEL', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
return out
`)

// rangeScript returns up to ARGV[3] members of the sorted set KEYS[1]
// between ARGV[1] and ARGV[2] (ZRANGEBYLEX bounds), each followed by the
// record in hash KEYS[2] under the member without its first ARGV[4]
// bytes ("" if it is gone).
var rangeScript = redis.NewScript(`
local members = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, tonumber(ARGV[3]))
local strip = tonumber(ARGV[4])
local out = {}
for _, m in ipairs(members) do
  out[#out + 1] = m
  out[#out + 1] = redis.call('HGET', KEYS[2], string.sub(m, strip + 1)) or ''
end
return out
`)

// invKeys are the keys of one broker's inventory.
type invKeys struct{ i, ix, tx, b, bx, ex string }

var brokerTagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func (s *redisStore) inv(broker string) invKeys {
	p := s.prefix + "inv:{" + brokerTagEscaper.Replace(broker) + "}:"
	return invKeys{i: p + "i", ix: p + "ix", tx: p + "tx", b: p + "b", bx: p + "bx", ex: p + "ex"}
}

func (s *redisStore) brokersKey() string { return s.prefix + "inv:brokers" }

func replaceArg(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// withBroker runs sc in the same round trip as adding broker to the
// brokers set (again with the script's text if the server lacks it).
func (s *redisStore) withBroker(ctx context.Context, broker string, sc *redis.Script, keys []string,
	args ...any) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	run := func(eval func(redis.Pipeliner) *redis.Cmd) error {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			p.SAdd(ctx, s.brokersKey(), broker)
			cmd = eval(p)
			return nil
		})
		return err
	}
	err := run(func(p redis.Pipeliner) *redis.Cmd { return sc.EvalSha(ctx, p, keys, args...) })
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = run(func(p redis.Pipeliner) *redis.Cmd { return sc.Eval(ctx, p, keys, args...) })
	}
	return cmd, err
}

func (s *redisStore) PutInstance(ctx context.Context, in Instance) (Instance, error) {
	if err := ctx.Err(); err != nil {
		return Instance{}, err
	}
	in, rec, err := prepareInstance(in, s.now())
	if err != nil {
		return Instance{}, err
	}
	k := s.inv(in.Broker)
	_, err = s.withBroker(ctx, in.Broker, putInstanceScript, []string{k.i, k.ix, k.tx},
		in.InstanceID, rec, in.Tenant, replaceArg(true))
	if err != nil {
		return Instance{}, s.fail(ctx, "put instance script", err)
	}
	return in, nil
}

func (s *redisStore) GetInstance(ctx context.Context, broker, instanceID string) (Instance, error) {
	if err := ctx.Err(); err != nil {
		return Instance{}, err
	}
	if err := checkInstanceKey(broker, instanceID); err != nil {
		return Instance{}, err
	}
	rec, err := s.client.HGet(ctx, s.inv(broker).i, instanceID).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return Instance{}, noInstance(broker, instanceID)
	case err != nil:
		return Instance{}, s.fail(ctx, "HGET", err)
	}
	return decodeInstance(broker, instanceID, rec)
}

func (s *redisStore) DeleteInstance(ctx context.Context, broker, instanceID string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	k := s.inv(broker)
	res, err := deleteInstanceScript.Run(ctx, s.client, []string{k.i, k.ix, k.tx, k.b, k.bx, k.ex}, instanceID).StringSlice()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, noInstance(broker, instanceID)
	case err != nil:
		return nil, s.fail(ctx, "delete instance script", err)
	}
	var gone []Binding
	for i := 1; i+1 < len(res); i += 2 {
		bd, err := decodeBindingMember(broker, res[i], res[i+1])
		if err != nil {
			return nil, err
		}
		gone = append(gone, bd)
	}
	return gone, nil
}

// decodeBindingMember decodes a binding record under its member (instance
// id NUL binding id) of broker.
func decodeBindingMember(broker, member, rec string) (Binding, error) {
	parts := splitKey(member)
	if len(parts) != 2 {
		return Binding{}, badKey([]byte(member))
	}
	return decodeBinding(broker, parts[0], parts[1], []byte(rec))
}

func (s *redisStore) PutBinding(ctx context.Context, bd Binding) (Binding, error) {
	if err := ctx.Err(); err != nil {
		return Binding{}, err
	}
	bd, rec, err := prepareBinding(bd, s.now())
	if err != nil {
		return Binding{}, err
	}
	k := s.inv(bd.Broker)
	_, err = s.withBroker(ctx, bd.Broker, putBindingScript, []string{k.b, k.bx, k.ex},
		bindingSubkey(bd.InstanceID, bd.BindingID), rec, replaceArg(true), expiryScore(bd.ExpiresAt))
	if err != nil {
		return Binding{}, s.fail(ctx, "put binding script", err)
	}
	return bd, nil
}

func (s *redisStore) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (Binding, error) {
	if err := ctx.Err(); err != nil {
		return Binding{}, err
	}
	if err := checkBindingKey(broker, instanceID, bindingID); err != nil {
		return Binding{}, err
	}
	rec, err := s.client.HGet(ctx, s.inv(broker).b, bindingSubkey(instanceID, bindingID)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return Binding{}, noBinding(broker, instanceID, bindingID)
	case err != nil:
		return Binding{}, s.fail(ctx, "HGET", err)
	}
	return decodeBinding(broker, instanceID, bindingID, rec)
}

func (s *redisStore) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	k, member := s.inv(broker), bindingSubkey(instanceID, bindingID)
	var del *redis.IntCmd
	_, err := s.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		del = p.HDel(ctx, k.b, member)
		p.ZRem(ctx, k.bx, member)
		p.ZRem(ctx, k.ex, member)
		return nil
	})
	switch {
	case err != nil:
		return s.fail(ctx, "delete binding", err)
	case del.Val() == 0:
		return noBinding(broker, instanceID, bindingID)
	}
	return nil
}
