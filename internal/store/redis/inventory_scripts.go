package redis

// The inventory's Lua scripts: each write of one broker's inventory is one
// script over that broker's keys (the layout is inventory.go's), and a
// listing by tenant filters the members on the server.

import (
	"github.com/redis/go-redis/v9"
)

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
// as ARGV[4] says: "1" whatever record is there, "0" unless there is one,
// "=" only if the record there is ARGV[6] ("" for none). It returns 1 if
// it stored, 0 if "0" kept the existing record, {the record there ("" for
// none)} if "=" found another; or, with ARGV[5] "1", the instance record
// it replaced ("" for none) instead of 1, for the usage record of a plan
// change. The instance's bindings stay. KEYS: ix, n.
var putInstanceScript = redis.NewScript(memberLua + `
local id = ARGV[1]
local old = find(KEYS[1], id .. '\0')
local rest = ''
local was = ''
if ARGV[4] == '=' and not old and ARGV[6] ~= '' then return {''} end
if old then
  local inst, at = instOf(old, #id)
  if ARGV[4] == '=' and inst ~= ARGV[6] then return {inst} end
  if #inst > 0 then
    if ARGV[4] == '0' then return 0 end
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
// as ARGV[4] says ("1", "0" or "=" ARGV[6], as putInstanceScript), and
// scores it ARGV[5] in ex (or takes it out where ARGV[5] is ""); 1 if
// stored, 0 if "0" kept it, {the record there ("" for none)} if "="
// found another. KEYS: ix, n, ex.
var putBindingScript = redis.NewScript(memberLua + `
local id, bid, rec = ARGV[1], ARGV[2], ARGV[3]
local old = find(KEYS[1], id .. '\0')
local m
if not old then
  if ARGV[4] == '=' and ARGV[6] ~= '' then return {''} end
  m = id .. '\0' .. p24(0) .. entry(bid, rec)
  count(KEYS[2], '\0b', 1)
else
  local s, e, cur = seek(old, #id, bid)
  if ARGV[4] == '=' and (cur or '') ~= ARGV[6] then return {cur or ''} end
  if s then
    if ARGV[4] == '0' then return 0 end
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
