package redis

import (
	"context"
	"iter"
	"slices"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Listing, counting, export and import of the redis backend's inventory
// (layout and costs in inventory.go).

// brokerNames returns the brokers f selects from the one named from on,
// in order.
func (s *redisStore) brokerNames(ctx context.Context, f store.InstanceFilter, from string) ([]string, error) {
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

// lexRange reads up to limit members of zset between lo and hi
// (ZRANGEBYLEX bounds; limit < 0: all).
func (s *redisStore) lexRange(ctx context.Context, zset, lo, hi string, limit int) ([]string, error) {
	res, err := s.client.ZRangeByLex(ctx, zset, &redis.ZRangeBy{Min: lo, Max: hi, Count: int64(limit)}).Result()
	if err != nil {
		return nil, s.fail(ctx, "ZRANGEBYLEX", err)
	}
	return res, nil
}

func (s *redisStore) ListInstances(ctx context.Context, f store.InstanceFilter, cursor string, limit int) ([]store.Instance, string, error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	cb, ci, limit, err := store.ListArgs(f, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	names, err := s.brokerNames(ctx, f, cb)
	if err != nil {
		return nil, "", err
	}
	var found []store.Instance
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
	page, next := store.PageOf(found, limit, store.InstanceName)
	return page, next, nil
}

// listBroker appends to found the instances of broker (of tenant, if set)
// after the instance id after ("": from the first), until found holds n:
// ranges of ix read by filterScript (members "id NUL ...": after the id,
// the first member past it is at or after "id \x01"), as many calls as it
// takes.
func (s *redisStore) listBroker(ctx context.Context, broker, tenant, after string, n int, found []store.Instance) ([]store.Instance, error) {
	k := s.inv(broker)
	lo := "-"
	if after != "" {
		lo = "[" + after + "\x01"
	}
	for len(found) < n {
		res, err := filterScript.Run(ctx, s.client, []string{k.ix}, lo, n-len(found), tenant, filterBudget).StringSlice()
		if err != nil {
			return nil, s.fail(ctx, "filter script", err)
		}
		for _, m := range res[1:] {
			in, err := decodeInstanceMember(broker, m)
			if err != nil {
				return nil, err
			}
			found = append(found, in)
		}
		if lo = res[0]; lo == "" {
			break // the broker has no more
		}
	}
	return found, nil
}

func (s *redisStore) CountInstances(ctx context.Context, f store.InstanceFilter) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := store.CheckFilter(f); err != nil {
		return 0, err
	}
	names, err := s.brokerNames(ctx, f, "")
	if err != nil {
		return 0, err
	}
	return s.sum(ctx, names, func(p redis.Pipeliner, k invKeys) func() int {
		if f.Tenant != "" {
			return countOf(p.HMGet(ctx, k.n, f.Tenant))
		}
		return countOf(p.HMGet(ctx, k.n, countInstances))
	})
}

// countOf reads a count of n once its pipeline has run.
func countOf(c *redis.SliceCmd) func() int {
	return func() int {
		n := 0
		if v := c.Val(); len(v) == 1 {
			s, _ := v[0].(string) // nil: none
			n, _ = strconv.Atoi(s)
		}
		return n
	}
}

// sum adds up one count per broker, read in one pipeline.
func (s *redisStore) sum(ctx context.Context, brokers []string, count func(redis.Pipeliner, invKeys) func() int) (int, error) {
	if len(brokers) == 0 {
		return 0, nil
	}
	cmds := make([]func() int, len(brokers))
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
		n += c()
	}
	return n, nil
}

// ListBindings reads the instance's member, with all its bindings (an
// instance has tens of bindings, not millions).
func (s *redisStore) ListBindings(ctx context.Context, broker, instanceID string) ([]store.Binding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.CheckInstanceKey(broker, instanceID); err != nil {
		return nil, err
	}
	m, ok, err := s.member(ctx, broker, instanceID)
	if !ok || err != nil || len(m.Bindings) == 0 {
		return nil, err
	}
	return m.SortedBindings(broker)
}

// decodeBindingRange decodes members "instance id NUL binding id NUL
// record" (expiringScript's), skipping those "" (bindings gone
// meanwhile).
func decodeBindingRange(broker string, res []string) ([]store.Binding, error) {
	var out []store.Binding
	for _, m := range res {
		if m == "" {
			continue
		}
		bd, err := decodeBindingMember(broker, m)
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
	if err := store.CheckName("broker", broker, false); err != nil {
		return 0, err
	}
	names, err := s.brokerNames(ctx, store.InstanceFilter{Broker: broker}, "")
	if err != nil {
		return 0, err
	}
	return s.sum(ctx, names, func(p redis.Pipeliner, k invKeys) func() int { return countOf(p.HMGet(ctx, k.n, countBindings)) })
}

// bindingsAfter reads the bindings of up to limit members of the broker
// of pos (or of the next broker with members) after pos, one
// ZRANGEBYLEX: a page may hold more or fewer than limit bindings.
func (s *redisStore) bindingsAfter(ctx context.Context, pos store.BindingPos, limit int) ([]store.Binding, store.BindingPos, bool, error) {
	if err := ctx.Err(); err != nil {
		return nil, pos, false, err
	}
	names, err := s.brokerNames(ctx, store.InstanceFilter{}, pos.Broker)
	if err != nil {
		return nil, pos, false, err
	}
	for _, broker := range names {
		lo := "-"
		if broker == pos.Broker {
			lo = "[" + pos.Instance + "\x00" // its bindings after pos.Binding, then the next instances
		}
		res, err := s.lexRange(ctx, s.inv(broker).ix, lo, "+", limit)
		if err != nil {
			return nil, pos, false, err
		}
		if len(res) == 0 {
			continue
		}
		var out []store.Binding
		for _, raw := range res {
			m, err := store.ParseMember(raw)
			if err != nil {
				return nil, pos, false, err
			}
			bds, err := m.SortedBindings(broker)
			if err != nil {
				return nil, pos, false, err
			}
			for _, bd := range bds {
				if store.ComparePos(store.BindingPos{Broker: broker, Instance: bd.InstanceID, Binding: bd.BindingID}, pos) > 0 {
					out = append(out, bd)
				}
			}
			pos = store.BindingPos{Broker: broker, Instance: m.ID + "\x01"} // after all of m: ids hold no NUL
		}
		// A short page ends this broker, not the export: the next call
		// starts after it.
		if len(res) < limit {
			pos = store.BindingPos{Broker: broker + "\x00"}
		}
		return out, pos, false, nil
	}
	return nil, pos, true, nil
}

func (s *redisStore) Export(ctx context.Context) iter.Seq2[store.Entry, error] {
	return store.Export(ctx, s.ListInstances, s.bindingsAfter)
}

// Import sends the batch in one pipeline: one SADD per broker, one script
// per entry by its SHA (the script's text goes once, not once per entry);
// the entries a server answered NOSCRIPT (it has not loaded the script
// yet: a new server, a Cluster shard, a SCRIPT FLUSH) were not run and go
// again in a second pipeline, with the script's text.
func (s *redisStore) Import(ctx context.Context, entries []store.Entry, replace bool) (store.ImportResult, error) {
	if err := ctx.Err(); err != nil {
		return store.ImportResult{}, err
	}
	prepared, err := store.PrepareEntries(entries, s.now())
	if err != nil {
		return store.ImportResult{}, err
	}
	if len(prepared) == 0 {
		return store.ImportResult{}, nil
	}
	cmds := make([]*redis.Cmd, len(prepared))
	send := func(which []int, withText bool) error {
		_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
			added := map[string]bool{}
			for _, i := range which {
				e := prepared[i]
				broker := entryBroker(e)
				if !added[broker] {
					p.SAdd(ctx, s.brokersKey(), broker)
					added[broker] = true
				}
				k := s.inv(broker)
				sc, keys, args := putInstanceScript, []string{k.ix, k.n}, []any(nil)
				if in := e.Instance; in != nil {
					args = []any{in.InstanceID, e.Rec, in.Tenant, replaceArg(replace)}
				} else {
					bd := e.Binding
					sc, keys = putBindingScript, []string{k.ix, k.n, k.ex}
					args = []any{bd.InstanceID, bd.BindingID, e.Rec, replaceArg(replace), expiryScore(bd.ExpiresAt)}
				}
				if withText {
					cmds[i] = sc.Eval(ctx, p, keys, args...)
				} else {
					cmds[i] = sc.EvalSha(ctx, p, keys, args...)
				}
			}
			return nil
		})
		return err
	}
	all := make([]int, len(prepared))
	for i := range all {
		all[i] = i
	}
	_ = send(all, false) // its errors are its commands'
	var again []int
	for i, c := range cmds {
		if redis.HasErrorPrefix(c.Err(), "NOSCRIPT") {
			again = append(again, i)
		}
	}
	if len(again) > 0 {
		err = send(again, true)
	}
	var res store.ImportResult
	for _, c := range cmds {
		if err == nil {
			err = c.Err() // a pipeline's error is its first command's
		}
		if err != nil {
			return store.ImportResult{}, s.fail(ctx, "import pipeline", err)
		}
		if n, _ := c.Int(); n == 1 {
			res.Written++
		} else {
			res.Skipped++
		}
	}
	return res, nil
}

func entryBroker(e store.PreparedEntry) string {
	if e.Instance != nil {
		return e.Instance.Broker
	}
	return e.Binding.Broker
}
