package redis

import (
	"context"
	"fmt"
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
// Cost: get and put of one record are one round trip and O(log n) on the
// server (ZRANGEBYLEX LIMIT 1; a script doing ZREM/ZADD), never a SCAN; a
// put without a Created over a record (putKeeping) and a delete (usage.go)
// two, the first reading what the second replaces. A page of a listing is one script per broker (O(log n + page)),
// after one SMEMBERS of inv:brokers when no broker is named. Counts are
// HMGET per broker.
//
// The scripts (inventory_scripts.go) read the member layout and the tenant of an instance record
// from its fixed head (version byte, tenant length byte, tenant), to move
// a count and to filter: the only part of the record's binary layout a
// script reads. Lua compares strings with the server's locale, so no
// script orders ids: the bindings of a member are sorted by the gateway.

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
// brokers set (again with the script's text if the server lacks it), and
// then queues after (if not nil) in that round trip.
func (s *redisStore) withBroker(ctx context.Context, broker string, sc *redis.Script, keys []string,
	after func(redis.Pipeliner), args ...any) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	err := s.durable(ctx, "inventory record", func(c redis.Cmdable) error {
		var err error
		cmd, err = scriptPipelined(ctx, c, sc, keys, args,
			func(p redis.Pipeliner) { p.SAdd(ctx, s.brokersKey(), broker) }, after)
		return err
	})
	return cmd, err
}

// scriptPipelined sends before's commands (if not nil), sc and after's
// commands (if not nil) in one pipeline on c, all again with the script's
// text if the server lacks it, and returns sc's command and the
// pipeline's error (its first failed command's).
func scriptPipelined(ctx context.Context, c redis.Cmdable, sc *redis.Script, keys []string, args []any,
	before, after func(redis.Pipeliner)) (*redis.Cmd, error) {
	var cmd *redis.Cmd
	run := func(eval func(redis.Pipeliner) *redis.Cmd) error {
		_, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
			if before != nil {
				before(p)
			}
			cmd = eval(p)
			if after != nil {
				after(p)
			}
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

func (s *redisStore) PutInstance(ctx context.Context, in store.Instance) (store.Instance, error) {
	in, _, err := s.PutInstanceCancelling(ctx, in, "")
	return in, err
}

// PutInstanceCancelling sends the orphan's HDEL and ZREM in the pipeline
// of the put's first script, after it: one round trip (and one WAIT with
// replica acknowledgements) for a new instance. The two deletions are
// not one MULTI as DeleteOrphan's (a pipeline may span a Cluster's
// slots): a reader between them finds the due entry of an orphan that is
// gone, which every reader of the due set skips. An in with a Created is
// one script, replacing whatever record is there; without, the put keeps
// the Created of the record it replaces (putKeeping).
func (s *redisStore) PutInstanceCancelling(ctx context.Context, in store.Instance, orphanID string) (store.Instance, bool, error) {
	if err := ctx.Err(); err != nil {
		return store.Instance{}, false, err
	}
	keep := in.Created.IsZero()
	in, rec, err := store.PrepareInstance(in, s.now())
	if err != nil {
		return store.Instance{}, false, err
	}
	var dels []*redis.IntCmd
	var cancel func(redis.Pipeliner)
	if orphanID != "" {
		cancel = func(p redis.Pipeliner) {
			dels = append(dels, p.HDel(ctx, s.orphansKey(), orphanID))
			p.ZRem(ctx, s.orphanDueKey(), orphanID)
		}
	}
	if keep {
		in, err = s.putKeeping(ctx, in, rec, cancel)
	} else {
		err = s.putReplacing(ctx, in, rec, cancel)
	}
	if err != nil {
		return store.Instance{}, false, err
	}
	cancelled := false
	for _, d := range dels { // the pipeline runs twice when the server lacked the script
		cancelled = cancelled || d.Val() > 0
	}
	return in, cancelled, nil
}

// putReplacing stores in over whatever record is there, in one script.
func (s *redisStore) putReplacing(ctx context.Context, in store.Instance, rec []byte, after func(redis.Pipeliner)) error {
	k := s.inv(in.Broker)
	cmd, err := s.withBroker(ctx, in.Broker, putInstanceScript, []string{k.ix, k.n}, after,
		in.InstanceID, rec, in.Tenant, replaceArg(true), "1")
	if err != nil {
		return s.fail(ctx, "put instance script", err)
	}
	was, err := cmd.Text()
	if err != nil {
		return s.fail(ctx, "put instance script", err)
	}
	return s.replan(ctx, []byte(was), in)
}

// putKeeping stores in (prepared with rec from an Instance without a
// Created) keeping the Created of the record it replaces: its script
// stores it only if the instance has no record, else returns the record,
// and a second script replaces that record, with its Created, if it is
// still there (compare-and-set, as a deletion's usage records; read again
// if not). A new instance is one round trip. after goes with the first.
func (s *redisStore) putKeeping(ctx context.Context, in store.Instance, rec []byte, after func(redis.Pipeliner)) (store.Instance, error) {
	k := s.inv(in.Broker)
	put, putRec, expect := in, rec, ""
	for range redisUsageRetries {
		cmd, err := s.withBroker(ctx, in.Broker, putInstanceScript, []string{k.ix, k.n}, after,
			in.InstanceID, putRec, in.Tenant, "=", "0", expect)
		if err != nil {
			return store.Instance{}, s.fail(ctx, "put instance script", err)
		}
		after = nil
		cur, found, err := otherRecord(cmd)
		switch {
		case err != nil:
			return store.Instance{}, s.fail(ctx, "put instance script", err)
		case !found: // stored
			return put, s.replan(ctx, []byte(expect), put)
		}
		if put, putRec, err = store.KeepInstanceCreated(in, rec, []byte(cur)); err != nil {
			return store.Instance{}, err
		}
		expect = cur
	}
	return store.Instance{}, fmt.Errorf("%w: instance %s/%s changed %d times while being put", store.ErrUnavailable,
		in.Broker, in.InstanceID, redisUsageRetries)
}

// otherRecord reads the answer of a put script with "=": found is false
// when it stored, else cur is the record it found instead.
func otherRecord(cmd *redis.Cmd) (cur string, found bool, err error) {
	v, err := cmd.Result()
	if err != nil {
		return "", false, err
	}
	if l, ok := v.([]any); ok && len(l) == 1 {
		cur, ok := l[0].(string)
		if !ok {
			return "", false, fmt.Errorf("put script answered %T in a list", l[0])
		}
		return cur, true, nil
	}
	return "", false, nil
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
	keep := bd.Created.IsZero()
	bd, rec, err := store.PrepareBinding(bd, s.now())
	if err != nil {
		return store.Binding{}, err
	}
	k := s.inv(bd.Broker)
	keys := []string{k.ix, k.n, k.ex}
	if !keep {
		_, err = s.withBroker(ctx, bd.Broker, putBindingScript, keys, nil,
			bd.InstanceID, bd.BindingID, rec, replaceArg(true), expiryScore(bd.ExpiresAt))
		if err != nil {
			return store.Binding{}, s.fail(ctx, "put binding script", err)
		}
		return bd, nil
	}
	// Keeping the Created of the binding it replaces: as putKeeping.
	put, putRec, expect := bd, rec, ""
	for range redisUsageRetries {
		cmd, err := s.withBroker(ctx, bd.Broker, putBindingScript, keys, nil,
			bd.InstanceID, bd.BindingID, putRec, "=", expiryScore(bd.ExpiresAt), expect)
		if err != nil {
			return store.Binding{}, s.fail(ctx, "put binding script", err)
		}
		cur, found, err := otherRecord(cmd)
		switch {
		case err != nil:
			return store.Binding{}, s.fail(ctx, "put binding script", err)
		case !found:
			return put, nil
		}
		if put, putRec, err = store.KeepBindingCreated(bd, rec, []byte(cur)); err != nil {
			return store.Binding{}, err
		}
		expect = cur
	}
	return store.Binding{}, fmt.Errorf("%w: binding %s/%s/%s changed %d times while being put", store.ErrUnavailable,
		bd.Broker, bd.InstanceID, bd.BindingID, redisUsageRetries)
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
