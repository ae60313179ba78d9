package redis

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The catalog records of the redis backend:
//
//	<prefix>{catalogs}           hash: broker -> BrokerCatalogs JSON
//	<prefix>{catalogs}:accepted  hash: broker -> its Accepted.Hash
//
// Both keys share the hash tag {catalogs}: putCatalogsScript checks the
// one and writes both on one node. A few records per gateway, each read
// whole: no index is needed.

func (s *redisStore) catalogsKey() string         { return s.prefix + "{catalogs}" }
func (s *redisStore) catalogsAcceptedKey() string { return s.prefix + "{catalogs}:accepted" }

// putCatalogsScript stores ARGV[3] as broker ARGV[1]'s record and ARGV[4]
// as its accepted hash if the stored accepted hash is ARGV[2] (a missing
// one is ""); it returns {1} when it did, {0, the stored hash} when not.
var putCatalogsScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if not cur then cur = '' end
if cur ~= ARGV[2] then return {0, cur} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[4])
return {1}
`)

func (s *redisStore) GetCatalogs(ctx context.Context, broker string) (store.BrokerCatalogs, error) {
	if err := ctx.Err(); err != nil {
		return store.BrokerCatalogs{}, err
	}
	v, err := s.client.HGet(ctx, s.catalogsKey(), broker).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return store.BrokerCatalogs{}, store.NoCatalogs(broker)
	case err != nil:
		return store.BrokerCatalogs{}, s.fail(ctx, "HGET", err)
	}
	return store.DecodeCatalogs(v)
}

func (s *redisStore) ListCatalogs(ctx context.Context) ([]store.BrokerCatalogs, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := s.client.HGetAll(ctx, s.catalogsKey()).Result()
	if err != nil {
		return nil, s.fail(ctx, "HGETALL", err)
	}
	out := make([]store.BrokerCatalogs, 0, len(all))
	for _, v := range all {
		bc, err := store.DecodeCatalogs([]byte(v))
		if err != nil {
			return nil, err
		}
		out = append(out, bc)
	}
	slices.SortFunc(out, func(a, b store.BrokerCatalogs) int { return strings.Compare(a.Broker, b.Broker) })
	return out, nil
}

func (s *redisStore) PutCatalogs(ctx context.Context, bc store.BrokerCatalogs, ifAccepted string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	bc, enc, err := store.PrepareCatalogs(bc)
	if err != nil {
		return err
	}
	res, err := putCatalogsScript.Run(ctx, s.client, []string{s.catalogsKey(), s.catalogsAcceptedKey()},
		bc.Broker, ifAccepted, enc, bc.Accepted.Hash).Slice()
	if err != nil {
		return s.fail(ctx, "EVALSHA put catalogs", err)
	}
	if ok, _ := res[0].(int64); ok == 1 {
		return nil
	}
	cur := ""
	if len(res) > 1 {
		cur, _ = res[1].(string)
	}
	return store.ChangedCatalogs(bc.Broker, ifAccepted, cur)
}

func (s *redisStore) DeleteCatalogs(ctx context.Context, broker string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	pipe := s.client.TxPipeline()
	n := pipe.HDel(ctx, s.catalogsKey(), broker)
	pipe.HDel(ctx, s.catalogsAcceptedKey(), broker)
	if _, err := pipe.Exec(ctx); err != nil {
		return s.fail(ctx, "HDEL", err)
	}
	if n.Val() == 0 {
		return store.NoCatalogs(broker)
	}
	return nil
}
