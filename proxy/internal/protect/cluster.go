package protect

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/redis/go-redis/v9"
)

// sharedLimits are the shared limits' (scope cluster) way to Redis: the
// state store's own client, through redis_rate's GCRA script, one round
// trip per limit a call is under. Replicas with the same
// state.redis.key_prefix share their buckets.
//
// When Redis fails, a production gateway must not turn a Redis blip into
// an outage of every tenant, so shared limits fail open to the local
// bucket of each limiter (the same rate and burst, per replica; Envoy's
// global rate limit fails open too, failure_mode_deny: false): the failure
// is counted (osb_gateway_store_errors_total{op="rate_limit"}), logged at
// most once every sharedLimitLogEvery, and Redis is left alone for
// sharedLimitRetry before it is asked again, so that calls do not each
// wait for a Redis that does not answer.
type sharedLimits struct {
	limiter *redis_rate.Limiter
	client  redis.UniversalClient
	prefix  string
	now     func() time.Time
	log     *slog.Logger
	metrics *metrics.Metrics
	// downUntil is when Redis is asked again after a failure (UnixNano
	// of now); 0: it is up.
	downUntil  atomic.Int64
	lastLogged atomic.Int64
}

const (
	// sharedLimitTimeout bounds one call to Redis: a round trip takes well
	// under a millisecond on a LAN, and a limit that waits longer costs
	// more than it protects.
	sharedLimitTimeout = 100 * time.Millisecond
	// sharedLimitRetry is how long the local buckets stand in after Redis
	// failed.
	sharedLimitRetry = time.Second
	// sharedLimitLogEvery is the least time between two logged failures.
	sharedLimitLogEvery = 10 * time.Second
)

func newSharedLimits(client redis.UniversalClient, prefix string, now func() time.Time, log *slog.Logger, m *metrics.Metrics) *sharedLimits {
	return &sharedLimits{limiter: redis_rate.NewLimiter(client), client: client, prefix: prefix, now: now, log: log, metrics: m}
}

// key is the Redis key of a shared bucket (redis_rate adds "rate:" in
// front): "<prefix>limit:<tenant>:<class>" for a tenant's,
// "<prefix>limit:<tenant>/<broker>:<class>" for a route's. Names are DNS
// labels, so keys cannot collide.
func (sl *sharedLimits) key(id limiterID) string {
	k := sl.prefix + "limit:" + id.tenant
	if id.broker != "" {
		k += "/" + id.broker
	}
	return k + ":" + callClassNames[id.class]
}

// gcra is l's bucket as redis_rate takes it: one call per 1/rate
// seconds, burst at once.
func gcra(l *limiter) redis_rate.Limit {
	return redis_rate.Limit{Rate: 1, Period: time.Duration(float64(time.Second) / l.rate), Burst: l.burst}
}

// take takes a token from l's shared bucket; it returns how long until
// one is available (≤ 0: taken), or an error when Redis failed or is
// left alone after a failure, and l's local bucket must decide.
func (sl *sharedLimits) take(ctx context.Context, l *limiter, now time.Time) (time.Duration, error) {
	if until := sl.downUntil.Load(); until != 0 && now.UnixNano() < until {
		return 0, errRedisResting
	}
	res, err := sl.allow(ctx, l)
	if err != nil {
		return 0, err
	}
	if res.Allowed > 0 {
		return 0, nil
	}
	return max(res.RetryAfter, time.Nanosecond), nil
}

// allow runs redis_rate's script for one call against l's bucket, within
// sharedLimitTimeout. A failure of Redis (not of the platform's request,
// which may have ended) is counted, logged and rests Redis.
func (sl *sharedLimits) allow(ctx context.Context, l *limiter) (*redis_rate.Result, error) {
	rctx, cancel := context.WithTimeout(ctx, sharedLimitTimeout)
	defer cancel()
	res, err := sl.limiter.Allow(rctx, l.key, gcra(l))
	if err == nil || ctx.Err() != nil {
		return res, err
	}
	now := sl.now()
	sl.downUntil.Store(now.Add(sharedLimitRetry).UnixNano())
	sl.metrics.StoreError("rate_limit")
	at := now.UnixNano()
	if last := sl.lastLogged.Load(); at-last >= int64(sharedLimitLogEvery) && sl.lastLogged.CompareAndSwap(last, at) {
		sl.log.LogAttrs(ctx, slog.LevelWarn, "shared rate limits unavailable; each replica enforces them alone",
			slog.String("error", err.Error()), slog.Duration("retry_in", sharedLimitRetry))
	}
	return nil, err
}

// errRedisResting stands for Redis while it is left alone after a
// failure.
var errRedisResting = redisResting{}

type redisResting struct{}

func (redisResting) Error() string { return "shared rate limits: Redis failed a moment ago" }
