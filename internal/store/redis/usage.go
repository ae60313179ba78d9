package redis

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Usage records on the redis backend: per broker, a sorted set inv:{B}:us
// of encoded records (encodeUsage) scored by their Deleted in microseconds
// (exact in a float64 until the year 2255), on the broker's slot. A
// deletion reads the member it deletes first and hands the script the
// usage records made of it, with the member as read: the script deletes
// and adds them only if the member is unchanged (else the gateway reads
// again), so the records and the deletion are one atomic step, for one
// more round trip per deprovision and unbind. A put that changes an
// instance's plan gets the record it replaced back from its script and
// adds the plan's usage record in a second round trip (see internal/store's usage.go).

// redisUsageRetries is how often a deletion reads again a member that
// changed between its read and its script (a concurrent write of the same
// instance: the gateway writes one instance under its lock, so rarely).
const redisUsageRetries = 8

// usageScore is the score of a usage record ending at t.
func usageScore(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

// replan adds the usage record of a put of in over the instance record
// was ("" when there was none), if it changed the plan.
func (s *redisStore) replan(ctx context.Context, was []byte, in store.Instance) error {
	r, replan, err := store.ReplanUsage(was, in, s.now())
	if err != nil || !replan {
		return err
	}
	err = s.client.ZAdd(ctx, s.inv(in.Broker).us, redis.Z{Score: float64(r.Deleted.UnixMicro()), Member: store.EncodeUsage(r)}).Err()
	return s.fail(ctx, "ZADD usage", err)
}

// deleteInstance runs deleteInstanceScript with the usage records of the
// member as read, until the member did not change in between; it returns
// the script's answer.
func (s *redisStore) deleteInstance(ctx context.Context, broker, instanceID string) ([]string, error) {
	k := s.inv(broker)
	for range redisUsageRetries {
		raw, err := s.client.ZRangeByLex(ctx, k.ix, lookupRange(instanceID+"\x00")).Result()
		if err != nil {
			return nil, s.fail(ctx, "ZRANGEBYLEX", err)
		}
		if len(raw) == 0 {
			return nil, store.NoInstance(broker, instanceID)
		}
		m, err := store.ParseMember(raw[0])
		if err != nil {
			return nil, err
		}
		gone, err := m.SortedBindings(broker)
		if err != nil {
			return nil, err
		}
		used, err := store.DeletedUsage(broker, instanceID, m.Instance, gone, s.now())
		if err != nil {
			return nil, err
		}
		args := []any{instanceID, raw[0]}
		for _, r := range used {
			args = append(args, usageScore(r.Deleted), store.EncodeUsage(r))
		}
		var res []string
		err = s.durable(ctx, "delete instance", func(c redis.Cmdable) error {
			var err error
			res, err = deleteInstanceScript.Run(ctx, c, []string{k.ix, k.n, k.ex, k.us}, args...).StringSlice()
			return err
		})
		switch {
		case errors.Is(err, redis.Nil):
			return nil, store.NoInstance(broker, instanceID)
		case err != nil:
			return nil, s.fail(ctx, "delete instance script", err)
		case len(res) == 0:
			continue // changed meanwhile
		case len(res)%2 != 1:
			return nil, fmt.Errorf("%w of instance %q", store.ErrBadMember, instanceID)
		}
		return res, nil
	}
	return nil, fmt.Errorf("%w: instance %s/%s changed %d times while being deleted", store.ErrUnavailable, broker, instanceID, redisUsageRetries)
}

// deleteBinding is deleteInstance for a binding.
func (s *redisStore) deleteBinding(ctx context.Context, broker, instanceID, bindingID string) error {
	k := s.inv(broker)
	for range redisUsageRetries {
		m, ok, err := s.member(ctx, broker, instanceID)
		if err != nil {
			return err
		}
		i := m.Binding(bindingID)
		if !ok || i < 0 {
			return store.NoBinding(broker, instanceID, bindingID)
		}
		rec := m.Bindings[i].Rec
		bd, err := store.DecodeBinding(broker, instanceID, bindingID, rec)
		if err != nil {
			return err
		}
		r := store.BindingUsage(bd, s.now())
		var n int
		err = s.durable(ctx, "delete binding", func(c redis.Cmdable) error {
			var err error
			n, err = deleteBindingScript.Run(ctx, c, []string{k.ix, k.n, k.ex, k.us},
				instanceID, bindingID, rec, usageScore(r.Deleted), store.EncodeUsage(r)).Int()
			return err
		})
		switch {
		case err != nil:
			return s.fail(ctx, "delete binding script", err)
		case n == 0:
			return store.NoBinding(broker, instanceID, bindingID)
		case n > 0:
			return nil
		}
	}
	return fmt.Errorf("%w: binding %s/%s/%s changed %d times while being deleted", store.ErrUnavailable, broker, instanceID, bindingID, redisUsageRetries)
}

// usageBrokers returns broker, or every broker with an inventory for "".
func (s *redisStore) usageBrokers(ctx context.Context, broker string) ([]string, error) {
	if broker != "" {
		return []string{broker}, nil
	}
	names, err := s.client.SMembers(ctx, s.brokersKey()).Result()
	return names, s.fail(ctx, "SMEMBERS", err)
}

func (s *redisStore) UsageRecords(ctx context.Context, broker string, after time.Time) iter.Seq2[store.UsageRecord, error] {
	return func(yield func(store.UsageRecord, error) bool) {
		if err := ctx.Err(); err != nil {
			yield(store.UsageRecord{}, err)
			return
		}
		brokers, err := s.usageBrokers(ctx, broker)
		if err != nil {
			yield(store.UsageRecord{}, err)
			return
		}
		for _, b := range brokers {
			if !s.usageOf(ctx, b, after, yield) {
				return
			}
		}
	}
}

// usageOf yields the records of one broker ending after after, a page at
// a time: each page starts at the last page's last score, skipping the
// members of that score already yielded. It returns false when it stopped
// (an error, or yield asked to).
func (s *redisStore) usageOf(ctx context.Context, broker string, after time.Time, yield func(store.UsageRecord, error) bool) bool {
	key := s.inv(broker).us
	lo, skip := "("+usageScore(after), int64(0)
	for {
		zs, err := s.client.ZRangeByScoreWithScores(ctx, key, &redis.ZRangeBy{Min: lo, Max: "+inf", Offset: skip, Count: store.UsagePage}).Result()
		if err != nil {
			yield(store.UsageRecord{}, s.fail(ctx, "ZRANGEBYSCORE usage", err))
			return false
		}
		for _, z := range zs {
			m, _ := z.Member.(string)
			r, err := store.DecodeUsage([]byte(m), int64(z.Score))
			if err != nil {
				yield(store.UsageRecord{}, err)
				return false
			}
			if !yield(r, nil) {
				return false
			}
		}
		if len(zs) < store.UsagePage {
			return true
		}
		last := zs[len(zs)-1].Score
		if next := strconv.FormatInt(int64(last), 10); next == lo {
			skip += int64(len(zs))
		} else {
			lo, skip = next, 0
			for _, z := range zs {
				if z.Score == last {
					skip++
				}
			}
		}
	}
}

func (s *redisStore) PurgeUsage(ctx context.Context, before time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	brokers, err := s.usageBrokers(ctx, "")
	if err != nil {
		return 0, err
	}
	total := 0
	for _, b := range brokers {
		key := s.inv(b).us
		for {
			ms, err := s.client.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: "(" + usageScore(before), Count: store.UsagePage}).Result()
			if err != nil {
				return total, s.fail(ctx, "ZRANGEBYSCORE usage", err)
			}
			if len(ms) == 0 {
				break
			}
			args := make([]any, len(ms))
			for i, m := range ms {
				args[i] = m
			}
			n, err := s.client.ZRem(ctx, key, args...).Result()
			if err != nil {
				return total, s.fail(ctx, "ZREM usage", err)
			}
			total += int(n)
			if len(ms) < store.UsagePage {
				break
			}
		}
	}
	return total, nil
}
