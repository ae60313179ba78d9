package redis

import (
	"context"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory of the redis backend. Keys, after RedisConfig.KeyPrefix:
//
//	inv:brokers       set: the brokers with an inventory
//	inv:{B}:ix        sorted set, scores 0: one member per instance id,
//	                  holding the instance's record and its bindings'
//	                  (the member layout below), in byte order of the ids
//	inv:{B}:n         hash: tenant -> instances with that tenant (none at 0);
//	                  "\x00i" -> instances, "\x00b" -> bindings
//	inv:{B}:ex        sorted set: instance id NUL binding id, scored by the
//	                  binding's ExpiresAt in microseconds (bindings with one)
//
// where B is the broker name with "%", "{" and "}" percent-encoded, so
// that the hash tag {B} is never cut short and every key of one broker is
// on one Cluster slot: each write is one Lua script over that broker's
// keys, atomic, and brokers spread over the cluster (one broker's
// inventory stays on one master).
//
// A member of ix is the instance id, a NUL and the instance's value
// (internal/store's inventory_member.go): its record, empty while the inventory holds
// bindings of an instance it has no record of, then its bindings in the
// order they were first stored. The ids sort the members, and the range
// [id NUL, id \x01) holds exactly the member of id (ids hold no NUL).
// An instance and its bindings in one member spend one sorted-set entry
// (about 95 bytes of skiplist node, dict entry and table slot on Redis 7)
// and one copy of the instance id instead of one per binding: measured with
// BenchmarkInventoryFootprintRedis on Redis 7.0 (a million instances with
// an expiring binding each), 1,069 bytes of used_memory per instance with
// the bindings in a sorted set of their own, 910 with them in their
// instance's member. A binding is read, written or deleted by reading and
// rewriting its instance's member: an instance has tens of bindings, not
// thousands.
//
// There is no index by tenant: a listing by tenant filters ix by the
// tenant in each instance record's head (filterScript), and counts by
// tenant are the counters of n. An index (a sorted set of tenant NUL
// instance id) cost 152 bytes per instance, 12% of the inventory; a
// listing by tenant, which only the admin API asks for, reads the broker's
// members from the cursor on until its page is full: a tenant holding a
// share s of the broker's instances costs a page about 1/s times the
// records (all of them, for a tenant with none), read by scripts of at
// most filterBudget members each (about a millisecond of the server each).
//
// Cost: get, put and delete of one record are one round trip and O(log n)
// on the server (ZRANGEBYLEX LIMIT 1; a script doing ZREM/ZADD), never a
// SCAN. A page of a listing is one script per broker (O(log n + page)),
// after one SMEMBERS of inv:brokers when no broker is named. Counts are
// HMGET per broker.
//
// The scripts read the member layout and the tenant of an instance record
// from its fixed head (version byte, tenant length byte, tenant), to move
// a count and to filter: the only part of the record's binary layout a
// script reads. Lua compares strings with the server's locale, so no
// script orders ids: the bindings of a member are sorted by the gateway.

// memberLua defines find(key, prefix): the member of the sorted set key
// that starts with prefix (an id and its NUL: at most one), or false;
// parse(m, idlen): the instance record and the {binding id, record} pairs
// of member m; build(id, inst, bindings): the member; seek(m, idlen, bid):
// where binding bid's entry starts and ends in m, and its record (nil if
// m has none); entry(bid, rec): a binding's entry; tenantOf(rec): the
// tenant of an instance record; count(key, field, delta): adds delta to a
// count of hash key, deleting it at zero (none for the field "").
const memberLua = `
local function find(key, prefix)
  local m = redis.call('ZRANGEBYLEX', key, '[' .. prefix, '(' .. string.sub(prefix, 1, -2) .. '\1', 'LIMIT', 0, 1)[1]
  return m or false
end
local function u24(s, i)
  local a, b, c = string.byte(s, i, i + 2)
  return a * 65536 + b * 256 + c
end
local function p24(n)
  return string.char(math.floor(n / 65536) % 256, math.floor(n / 256) % 256, n % 256)
end
local function instOf(m, idlen)
  local n = u24(m, idlen + 2)
  return string.sub(m, idlen + 5, idlen + 4 + n), idlen + 5 + n
end
local function parse(m, idlen)
  local inst, i = instOf(m, idlen)
  local bs = {}
  while i <= #m do
    local bl = string.byte(m, i) * 256 + string.byte(m, i + 1)
    local bid = string.sub(m, i + 2, i + 1 + bl)
    i = i + 2 + bl
    local rl = u24(m, i)
    bs[#bs + 1] = {bid, string.sub(m, i + 3, i + 2 + rl)}
    i = i + 3 + rl
  end
  return inst, bs
end
local function build(id, inst, bs)
  local parts = {id, '\0', p24(#inst), inst}
  for _, b in ipairs(bs) do parts[#parts + 1] = entry(b[1], b[2]) end
  return table.concat(parts)
end
local function seek(m, idlen, bid)
  local _, i = instOf(m, idlen)
  while i <= #m do
    local bl = string.byte(m, i) * 256 + string.byte(m, i + 1)
    local rl = u24(m, i + 2 + bl)
    local e = i + 4 + bl + rl
    if bl == #bid and string.sub(m, i + 2, i + 1 + bl) == bid then
      return i, e, string.sub(m, i + 5 + bl, e)
    end
    i = e + 1
  end
  return nil
end
local function entry(bid, rec)
  return string.char(math.floor(#bid / 256), #bid % 256) .. bid .. p24(#rec) .. rec
end
local function tenantOf(rec)
  local n = string.byte(rec, 2) or 0
  return string.sub(rec, 3, 2 + n)
end
local function count(key, field, delta)
  if field == '' or delta == 0 then return end
  if redis.call('HINCRBY', key, field, delta) <= 0 then redis.call('HDEL', key, field) end
end
`

// Fields of n beside the tenants' (a tenant name holds no NUL).
const (
	countInstances = "\x00i"
	countBindings  = "\x00b"
)

// putInstanceScript stores ARGV[2] as instance ARGV[1] with tenant ARGV[3]
// unless it exists and ARGV[4] is not "1"; it returns 1 if it stored, 0
// if it kept the existing record, or, with ARGV[5] "1", the instance
// record it replaced ("" for none) instead of 1, for the usage record of a
// plan change. The instance's bindings stay. KEYS: ix, n.
var putInstanceScript = redis.NewScript(memberLua + `
local id = ARGV[1]
local old = find(KEYS[1], id .. '\0')
local rest = ''
local was = ''
if old then
  local inst, at = instOf(old, #id)
  if #inst > 0 then
    if ARGV[4] ~= '1' then return 0 end
    count(KEYS[2], tenantOf(inst), -1)
    count(KEYS[2], '\0i', -1)
    was = inst
  end
  rest = string.sub(old, at)
  redis.call('ZREM', KEYS[1], old)
end
redis.call('ZADD', KEYS[1], 0, id .. '\0' .. p24(#ARGV[2]) .. ARGV[2] .. rest)
count(KEYS[2], ARGV[3], 1)
count(KEYS[2], '\0i', 1)
if ARGV[5] == '1' then return was end
return 1
`)

// filterBudget is how many members filterScript reads at most in one call.
const filterBudget = 2000

// filterScript returns up to ARGV[2] instances of ix (KEYS[1]) from
// ARGV[1] (a ZRANGEBYLEX bound) on, of tenant ARGV[3] (any, if ""),
// reading at most ARGV[4] members: {where to go on ("" at the end of ix),
// "id NUL instance record"...}. Members of bindings only are skipped.
var filterScript = redis.NewScript(memberLua + `
local lo, want, tenant, budget = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local out = {''}
while budget > 0 do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], lo, '+', 'LIMIT', 0, math.min(budget, 200))
  for _, m in ipairs(ms) do
    local p = string.find(m, '\0', 1, true)
    local id = string.sub(m, 1, p - 1)
    lo = '[' .. id .. '\1'
    local inst = instOf(m, p - 1)
    if #inst > 0 and (tenant == '' or tenantOf(inst) == tenant) then
      out[#out + 1] = id .. '\0' .. inst
      if #out > want then out[1] = lo return out end
    end
  end
  if #ms < math.min(budget, 200) then return out end
  budget = budget - #ms
end
out[1] = lo
return out
`)

// putBindingScript stores ARGV[3] as binding ARGV[2] of instance ARGV[1]
// unless it exists and ARGV[4] is not "1", and scores it ARGV[5] in ex
// (or takes it out where ARGV[5] is ""); 1 if stored, else 0. KEYS: ix,
// n, ex.
var putBindingScript = redis.NewScript(memberLua + `
local id, bid, rec = ARGV[1], ARGV[2], ARGV[3]
local old = find(KEYS[1], id .. '\0')
local m
if not old then
  m = id .. '\0' .. p24(0) .. entry(bid, rec)
  count(KEYS[2], '\0b', 1)
else
  local s, e = seek(old, #id, bid)
  if s then
    if ARGV[4] ~= '1' then return 0 end
    m = string.sub(old, 1, s - 1) .. entry(bid, rec) .. string.sub(old, e + 1)
  else
    m = old .. entry(bid, rec)
    count(KEYS[2], '\0b', 1)
  end
  redis.call('ZREM', KEYS[1], old)
end
redis.call('ZADD', KEYS[1], 0, m)
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[3], ARGV[5], id .. '\0' .. bid)
else
  redis.call('ZREM', KEYS[3], id .. '\0' .. bid)
end
return 1
`)

// deleteBindingScript deletes binding ARGV[2] of instance ARGV[1] if its
// record is ARGV[3], and adds ARGV[5] to us scored ARGV[4] (its usage
// record): 1 if it did, 0 if the binding was not there, -1 if its record
// is another (read again and retry). KEYS: ix, n, ex, us.
var deleteBindingScript = redis.NewScript(memberLua + `
local id, bid = ARGV[1], ARGV[2]
local old = find(KEYS[1], id .. '\0')
if not old then return 0 end
local s, e, rec = seek(old, #id, bid)
if not s then return 0 end
if rec ~= ARGV[3] then return -1 end
redis.call('ZADD', KEYS[4], ARGV[4], ARGV[5])
redis.call('ZREM', KEYS[1], old)
local m = string.sub(old, 1, s - 1) .. string.sub(old, e + 1)
if #m > #id + 4 then redis.call('ZADD', KEYS[1], 0, m) end
redis.call('ZREM', KEYS[3], id .. '\0' .. bid)
count(KEYS[2], '\0b', -1)
return 1
`)

// deleteInstanceScript deletes instance ARGV[1] and its bindings if its
// member is ARGV[2], and adds ARGV[4], ARGV[6]... to us scored ARGV[3],
// ARGV[5]... (their usage records). It returns false if there was
// neither, {} if the member is another (read again and retry), else
// {instance record or "", binding id, binding record, ...}. KEYS: ix, n,
// ex, us.
var deleteInstanceScript = redis.NewScript(memberLua + `
local id = ARGV[1]
local old = find(KEYS[1], id .. '\0')
if not old then return false end
if old ~= ARGV[2] then return {} end
for i = 3, #ARGV, 2 do redis.call('ZADD', KEYS[4], ARGV[i], ARGV[i + 1]) end
local inst, bs = parse(old, #id)
redis.call('ZREM', KEYS[1], old)
if #inst > 0 then
  count(KEYS[2], tenantOf(inst), -1)
  count(KEYS[2], '\0i', -1)
end
local out = {inst}
for _, b in ipairs(bs) do
  out[#out + 1] = b[1]
  out[#out + 1] = b[2]
  redis.call('ZREM', KEYS[3], id .. '\0' .. b[1])
end
count(KEYS[2], '\0b', -#bs)
return out
`)

// decodeInstanceMember decodes "id NUL record", as filterScript returns
// an instance.
func decodeInstanceMember(broker, m string) (store.Instance, error) {
	id, rec, ok := strings.Cut(m, "\x00")
	if !ok {
		return store.Instance{}, store.BadKey([]byte(m))
	}
	return store.DecodeInstance(broker, id, []byte(rec))
}

// decodeBindingMember decodes "instance id NUL binding id NUL record", as
// expiringScript returns a binding.
func decodeBindingMember(broker, m string) (store.Binding, error) {
	parts := strings.SplitN(m, "\x00", 3)
	if len(parts) != 3 {
		return store.Binding{}, store.BadKey([]byte(m))
	}
	return store.DecodeBinding(broker, parts[0], parts[1], []byte(parts[2]))
}

// lookupRange is the ZRANGEBYLEX range of the members that start with
// prefix.
func lookupRange(prefix string) *redis.ZRangeBy {
	return &redis.ZRangeBy{Min: "[" + prefix, Max: "(" + prefix[:len(prefix)-1] + "\x01", Count: 1}
}

// member reads the member of an instance id: ok false if there is none.
func (s *redisStore) member(ctx context.Context, broker, instanceID string) (store.Member, bool, error) {
	found, err := s.client.ZRangeByLex(ctx, s.inv(broker).ix, lookupRange(instanceID+"\x00")).Result()
	switch {
	case err != nil:
		return store.Member{}, false, s.fail(ctx, "ZRANGEBYLEX", err)
	case len(found) == 0:
		return store.Member{}, false, nil
	}
	m, err := store.ParseMember(found[0])
	return m, err == nil, err
}

// invKeys are the keys of one broker's inventory.
type invKeys struct{ ix, n, ex, us string }

var brokerTagEscaper = strings.NewReplacer("%", "%25", "{", "%7B", "}", "%7D")

func (s *redisStore) inv(broker string) invKeys {
	p := s.prefix + "inv:{" + brokerTagEscaper.Replace(broker) + "}:"
	return invKeys{ix: p + "ix", n: p + "n", ex: p + "ex", us: p + "us"}
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
	err := s.durable(ctx, "inventory record", func(c redis.Cmdable) error {
		run := func(eval func(redis.Pipeliner) *redis.Cmd) error {
			_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
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
		return err
	})
	return cmd, err
}

func (s *redisStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, err
	}
	k := s.inv(in.Broker)
	cmd, err := s.withBroker(ctx, in.Broker, putInstanceScript, []string{k.ix, k.n},
		in.InstanceID, rec, in.Tenant, replaceArg(true), "1")
	if err != nil {
		return store.Instance{}, s.fail(ctx, "put instance script", err)
	}
	was, err := cmd.Text()
	if err != nil {
		return store.Instance{}, s.fail(ctx, "put instance script", err)
	}
	if err := s.replan(ctx, []byte(was), in); err != nil {
		return store.Instance{}, err
	}
	return in, nil
}

func (s *redisStore) GetInstance(ctx context.Context, broker, instanceID string) (store.Instance, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return store.Instance{}, err
	}
	m, ok, err := s.member(ctx, broker, instanceID)
	switch {
	case err != nil:
		return store.Instance{}, err
	case !ok || len(m.Instance) == 0:
		return store.Instance{}, store.NoInstance(broker, instanceID)
	}
	return store.DecodeInstance(broker, instanceID, m.Instance)
}

func (s *redisStore) DeleteInstance(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	res, err := s.deleteInstance(ctx, broker, instanceID)
	if err != nil {
		return nil, err
	}
	m := store.Member{ID: instanceID}
	for i := 1; i < len(res); i += 2 {
		m.Bindings = append(m.Bindings, store.MemberBinding{ID: res[i], Rec: []byte(res[i+1])})
	}
	gone, err := m.SortedBindings(broker)
	if len(gone) == 0 {
		gone = nil
	}
	return gone, err
}

func (s *redisStore) PutBinding(ctx context.Context, bd store.Binding) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	k := s.inv(bd.Broker)
	_, err = s.withBroker(ctx, bd.Broker, putBindingScript, []string{k.ix, k.n, k.ex},
		bd.InstanceID, bd.BindingID, rec, replaceArg(true), expiryScore(bd.ExpiresAt))
	if err != nil {
		return store.Binding{}, s.fail(ctx, "put binding script", err)
	}
	return bd, nil
}

func (s *redisStore) GetBinding(ctx context.Context, broker, instanceID, bindingID string) (store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return store.Binding{}, err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return store.Binding{}, err
	}
	m, _, err := s.member(ctx, broker, instanceID)
	if err != nil {
		return store.Binding{}, err
	}
	if i := m.Binding(bindingID); i >= 0 {
		return store.DecodeBinding(broker, instanceID, bindingID, m.Bindings[i].Rec)
	}
	return store.Binding{}, store.NoBinding(broker, instanceID, bindingID)
}

func (s *redisStore) DeleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckBindingKey(broker, instanceID, bindingID); err != nil {
		return err
	}
	return s.deleteBinding(ctx, broker, instanceID, bindingID)
}
