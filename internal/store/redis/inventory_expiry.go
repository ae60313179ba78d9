package redis

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The redis backend's expiry index: per broker, the sorted set ex scores
// each binding with an ExpiresAt by that time in microseconds since 1970
// (exact in a score's double until the year 2255; later times may tie with
// a neighbour, which only moves a binding among its equals). A read is one
// range per broker, a count one ZCOUNT per broker, in one pipeline.

// expiryScore is the score of t in ex, "" for the zero time (no entry).
func expiryScore(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixMicro(), 10)
}

// expiringScript returns up to ARGV[2] members of the sorted set KEYS[1]
// (ex) scored below ARGV[1], lowest first, each as "instance id NUL
// binding id NUL record", read from its instance's member of KEYS[2]
// (ix; "" if it is gone).
var expiringScript = redis.NewScript(memberLua + `
local members = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local out = {}
for _, e in ipairs(members) do
  local p = string.find(e, '\0', 1, true)
  local id, bid = string.sub(e, 1, p - 1), string.sub(e, p + 1)
  local m = find(KEYS[2], id .. '\0')
  local rec
  if m then _, _, rec = seek(m, #id, bid) end
  out[#out + 1] = rec and (e .. '\0' .. rec) or ''
end
return out
`)

// ExpiringBindings reads up to limit bindings from each broker's ex and
// keeps the soonest limit of them: one round trip for a broker, two for
// all (SMEMBERS, then a pipeline of one script per broker).
func (s *redisStore) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	limit, err := store.ExpiringArgs(broker, limit)
	if err != nil {
		return nil, err
	}
	names, err := s.brokerNames(ctx, store.InstanceFilter{Broker: broker}, "")
	if err != nil {
		return nil, err
	}
	score := strconv.FormatInt(before.UnixMicro(), 10)
	if len(names) == 1 { // one round trip, the script by its SHA
		k := s.inv(names[0])
		res, err := expiringScript.Run(ctx, s.client, []string{k.ex, k.ix}, score, limit).StringSlice()
		if err != nil {
			return nil, s.fail(ctx, "expiring script", err)
		}
		return decodeBindingRange(names[0], res)
	}
	// Several brokers: one pipeline, the script with its text (so a
	// server without it loaded needs no second try).
	cmds := make([]*redis.Cmd, len(names))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			k := s.inv(name)
			cmds[i] = expiringScript.Eval(ctx, p, []string{k.ex, k.ix}, score, limit)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "expiring pipeline", err)
	}
	var found []store.Binding
	for i, c := range cmds {
		res, err := c.StringSlice()
		if err != nil {
			return nil, s.fail(ctx, "expiring script", err)
		}
		page, err := decodeBindingRange(names[i], res)
		if err != nil {
			return nil, err
		}
		found = append(found, page...)
	}
	slices.SortFunc(found, store.ByExpiry)
	return found[:min(limit, len(found))], nil
}

func (s *redisStore) CountExpiring(ctx context.Context, before time.Time) (map[string]int, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	names, err := s.brokerNames(ctx, store.InstanceFilter{}, "")
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	if len(names) == 0 {
		return counts, nil
	}
	score := "(" + strconv.FormatInt(before.UnixMicro(), 10)
	cmds := make([]*redis.IntCmd, len(names))
	_, err = s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, name := range names {
			cmds[i] = p.ZCount(ctx, s.inv(name).ex, "-inf", score)
		}
		return nil
	})
	if err != nil {
		return nil, s.fail(ctx, "count expiring", err)
	}
	for i, c := range cmds {
		if n := int(c.Val()); n > 0 {
			counts[names[i]] = n
		}
	}
	return counts, nil
}
