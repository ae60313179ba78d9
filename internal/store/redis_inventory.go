package store

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strconv"
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
// binding) unless it exists and ARGV[3] is not "1"; 1 if stored, else 0.
// KEYS: b, bx.
var putBindingScript = redis.NewScript(`
if ARGV[3] ~= '1' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return 1
`)

// deleteInstanceScript deletes instance ARGV[1] and its bindings. It
// returns false if there was neither, else {instance record or "",
// binding member, binding record, ...}. KEYS: i, ix, tx, b, bx.
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
type invKeys struct{ i, ix, tx, b, bx string }

var brokerTagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func (s *redisStore) inv(broker string) invKeys {
	p := s.prefix + "inv:{" + brokerTagEscaper.Replace(broker) + "}:"
	return invKeys{i: p + "i", ix: p + "ix", tx: p + "tx", b: p + "b", bx: p + "bx"}
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
	res, err := deleteInstanceScript.Run(ctx, s.client, []string{k.i, k.ix, k.tx, k.b, k.bx}, instanceID).StringSlice()
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

// brokerNames returns the brokers f selects from the one named from on,
// in order.
func (s *redisStore) brokerNames(ctx context.Context, f InstanceFilter, from string) ([]string, error) {
	if f.Broker != "" {
		if f.Broker < from {
			return nil, nil
		}
		return []string{f.Broker}, nil
	}
	names, err := s.client.SMembers(ctx, s.brokersKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, "SMEMBERS", err)
	}
	slices.Sort(names)
	i, _ := slices.BinarySearch(names, from)
	return names[i:], nil
}

// rangeRecords runs rangeScript: up to limit members of zset between lo
// and hi, each with its record from hash (under the member without strip
// bytes; "" if gone).
func (s *redisStore) rangeRecords(ctx context.Context, zset, hash, lo, hi string, limit, strip int) ([]string, error) {
	res, err := rangeScript.Run(ctx, s.client, []string{zset, hash}, lo, hi, strconv.Itoa(limit), strconv.Itoa(strip)).StringSlice()
	if err != nil {
		return nil, s.fail(ctx, "range script", err)
	}
	return res, nil
}

func (s *redisStore) ListInstances(ctx context.Context, f InstanceFilter, cursor string, limit int) ([]Instance, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	cb, ci, limit, err := listArgs(f, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	names, err := s.brokerNames(ctx, f, cb)
	if err != nil {
		return nil, "", err
	}
	var found []Instance
	for _, broker := range names {
		after := ""
		if broker == cb {
			after = ci
		}
		if found, err = s.listBroker(ctx, broker, f.Tenant, after, limit+1, found); err != nil {
			return nil, "", err
		}
		if len(found) > limit {
			break
		}
	}
	page, next := pageOf(found, limit, instanceName)
	return page, next, nil
}

// listBroker appends to found the instances of broker (of tenant, if set)
// after the instance id after ("": from the first), until found holds n.
func (s *redisStore) listBroker(ctx context.Context, broker, tenant, after string, n int, found []Instance) ([]Instance, error) {
	// A range of ix, or of tx within the tenant's prefix "tenant NUL".
	k := s.inv(broker)
	zset, prefix, lo, hi := k.ix, "", "-", "+"
	if tenant != "" {
		zset, prefix, lo, hi = k.tx, tenant+"\x00", "["+tenant+"\x00", "("+tenant+"\x01"
	}
	if after != "" {
		lo = "(" + prefix + after
	}
	strip := len(prefix)
	for len(found) < n {
		want := n - len(found)
		res, err := s.rangeRecords(ctx, zset, k.i, lo, hi, want, strip)
		if err != nil {
			return nil, err
		}
		for i := 0; i+1 < len(res); i += 2 {
			if res[i+1] == "" { // an index entry without its record
				continue
			}
			in, err := decodeInstance(broker, res[i][strip:], []byte(res[i+1]))
			if err != nil {
				return nil, err
			}
			found = append(found, in)
		}
		if len(res)/2 < want {
			break // the broker has no more
		}
		lo = "(" + res[len(res)-2]
	}
	return found, nil
}

func (s *redisStore) CountInstances(ctx context.Context, f InstanceFilter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkFilter(f); err != nil {
		return 0, err
	}
	names, err := s.brokerNames(ctx, f, "")
	if err != nil {
		return 0, err
	}
	return s.sum(ctx, names, func(p redis.Pipeliner, k invKeys) *redis.IntCmd {
		if f.Tenant != "" {
			return p.ZLexCount(ctx, k.tx, "["+f.Tenant+"\x00", "("+f.Tenant+"\x01")
		}
		return p.HLen(ctx, k.i)
	})
}

// sum adds up one count per broker, read in one pipeline.
func (s *redisStore) sum(ctx context.Context, brokers []string, count func(redis.Pipeliner, invKeys) *redis.IntCmd) (int, error) {
	if len(brokers) == 0 {
		return 0, nil
	}
	cmds := make([]*redis.IntCmd, len(brokers))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, b := range brokers {
			cmds[i] = count(p, s.inv(b))
		}
		return nil
	})
	if err != nil {
		return 0, s.fail(ctx, "count", err)
	}
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, nil
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
	_, err = s.withBroker(ctx, bd.Broker, putBindingScript, []string{k.b, k.bx},
		bindingSubkey(bd.InstanceID, bd.BindingID), rec, replaceArg(true))
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

// ListBindings reads the instance's bindings in one script, whatever their
// number (an instance has tens of bindings, not millions).
func (s *redisStore) ListBindings(ctx context.Context, broker, instanceID string) ([]Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	k := s.inv(broker)
	res, err := s.rangeRecords(ctx, k.bx, k.b, "["+instanceID+"\x00", "("+instanceID+"\x01", -1, 0)
	if err != nil {
		return nil, err
	}
	return decodeBindingRange(broker, res)
}

// decodeBindingRange decodes what rangeScript returned from bx, skipping
// bindings gone meanwhile.
func decodeBindingRange(broker string, res []string) ([]Binding, error) {
	var out []Binding
	for i := 0; i+1 < len(res); i += 2 {
		if res[i+1] == "" {
			continue
		}
		bd, err := decodeBindingMember(broker, res[i], res[i+1])
		if err != nil {
			return nil, err
		}
		out = append(out, bd)
	}
	return out, nil
}

func (s *redisStore) CountBindings(ctx context.Context, broker string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := checkName("broker", broker, false); err != nil {
		return 0, err
	}
	names, err := s.brokerNames(ctx, InstanceFilter{Broker: broker}, "")
	if err != nil {
		return 0, err
	}
	return s.sum(ctx, names, func(p redis.Pipeliner, k invKeys) *redis.IntCmd { return p.HLen(ctx, k.b) })
}

// bindingsAfter reads up to limit bindings of the broker of pos (or of the
// next broker with bindings), one script call.
func (s *redisStore) bindingsAfter(ctx context.Context, pos bindingPos, limit int) ([]Binding, bindingPos, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, pos, false, err
	}
	names, err := s.brokerNames(ctx, InstanceFilter{}, pos.broker)
	if err != nil {
		return nil, pos, false, err
	}
	for _, broker := range names {
		lo := "-"
		if broker == pos.broker {
			lo = "(" + bindingSubkey(pos.instance, pos.binding)
		}
		k := s.inv(broker)
		res, err := s.rangeRecords(ctx, k.bx, k.b, lo, "+", limit, 0)
		if err != nil {
			return nil, pos, false, err
		}
		if len(res) == 0 {
			continue
		}
		out, err := decodeBindingRange(broker, res)
		if err != nil {
			return nil, pos, false, err
		}
		last := splitKey(res[len(res)-2])
		if len(last) != 2 {
			return nil, pos, false, badKey([]byte(res[len(res)-2]))
		}
		// A short page ends this broker, not the export: the next call
		// starts after it.
		next := bindingPos{broker, last[0], last[1]}
		if len(res)/2 < limit {
			next = bindingPos{broker: broker + "\x00"}
		}
		return out, next, false, nil
	}
	return nil, pos, true, nil
}

func (s *redisStore) Export(ctx context.Context) iter.Seq2[Entry, error] {
	return export(ctx, s.ListInstances, s.bindingsAfter)
}

// Import sends the batch in one pipeline: one SADD per broker, one script
// per entry (with its text, so a server without the script loaded needs
// no second try).
func (s *redisStore) Import(ctx context.Context, entries []Entry, replace bool) (ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return ImportResult{}, err
	}
	prepared, err := prepareEntries(entries, s.now())
	if err != nil {
		return ImportResult{}, err
	}
	if len(prepared) == 0 {
		return ImportResult{}, nil
	}
	cmds := make([]*redis.Cmd, len(prepared))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		added := map[string]bool{}
		for i, e := range prepared {
			broker := entryBroker(e)
			if !added[broker] {
				p.SAdd(ctx, s.brokersKey(), broker)
				added[broker] = true
			}
			k := s.inv(broker)
			if in := e.instance; in != nil {
				cmds[i] = putInstanceScript.Eval(ctx, p, []string{k.i, k.ix, k.tx}, in.InstanceID, e.rec, in.Tenant, replaceArg(replace))
			} else {
				bd := e.binding
				cmds[i] = putBindingScript.Eval(ctx, p, []string{k.b, k.bx}, bindingSubkey(bd.InstanceID, bd.BindingID), e.rec, replaceArg(replace))
			}
		}
		return nil
	})
	if err != nil {
		return ImportResult{}, s.fail(ctx, "import pipeline", err)
	}
	var res ImportResult
	for _, c := range cmds {
		if n, _ := c.Int(); n == 1 {
			res.Written++
		} else {
			res.Skipped++
		}
	}
	return res, nil
}

func entryBroker(e preparedEntry) string {
	if e.instance != nil {
		return e.instance.Broker
	}
	return e.binding.Broker
}
