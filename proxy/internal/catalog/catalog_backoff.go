package catalog

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// fetchFailure is the remembered failure of a catalog's latest fetch. Until
// next, no fetch of the same catalog starts on a platform call's behalf:
// calls that need the catalog get the remembered failure at once, and a
// stale entry is served without a background refresh. An admin refresh,
// the warm-up and check fetch regardless.
type fetchFailure struct {
	cause error     // why the fetch failed (said to the platform: see said)
	at    time.Time // when it failed
	next  time.Time // the earliest start of the next fetch
	count int       // consecutive failures, 1 for the first
}

// backingOff returns the remembered failure of k when its next fetch may
// not start yet at now, else nil.
func (c *Cache) backingOff(k Key, now time.Time) *fetchFailure {
	ff, ok := c.failures.Peek(k)
	if !ok || !now.Before(ff.next) {
		return nil
	}
	return ff
}

// recordFailure remembers a failed fetch of f's catalog at now: the wait
// before the next one is the broker's catalog.retry_interval, doubled for
// each further consecutive failure up to catalog.retry_max_interval.
func (c *Cache) recordFailure(f Fetch, cause error, now time.Time) *fetchFailure {
	count := 1
	if prev, ok := c.failures.Peek(f.Key); ok {
		count = prev.count + 1
	}
	ff := &fetchFailure{cause: cause, at: now, count: count,
		next: now.Add(RetryWait(f.Up.Cfg.Catalog, count))}
	c.failures.Add(f.Key, ff)
	return ff
}

// RetryWait is the wait after the count-th consecutive failed fetch.
func RetryWait(c config.BrokerCatalog, count int) time.Duration {
	first, limit := c.RetryInterval, c.RetryMaxInterval
	if first <= 0 {
		first = config.DefaultCatalogRetryInterval
	}
	if limit < first {
		limit = max(first, config.DefaultCatalogRetryMaxInterval)
	}
	d := first
	for i := 1; i < count && d < limit; i++ {
		if d > math.MaxInt64/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// unavailable is the 503 for a call that needs k's catalog while none is
// cached and the latest fetch failed: it names the broker, the cause and
// when the next fetch may start (also as Retry-After, in seconds).
func unavailable(k Key, ff *fetchFailure, now time.Time) *osb.Error {
	wait := ff.next.Sub(now)
	if wait < 0 {
		wait = 0
	}
	secs := int64(math.Ceil(wait.Seconds()))
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: ff.cause,
		Header: http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}},
		Description: fmt.Sprintf("the catalog of broker %q is unavailable (none is cached): %s; the gateway fetches it again at %s (in %s)",
			k.Broker, upstream.Said(ff.cause), ff.next.UTC().Format(time.RFC3339), wait.Round(time.Second))}
}

// forgetFailures drops the remembered failures of the named broker.
func (c *Cache) forgetFailures(broker string) {
	for _, k := range c.failures.Keys() {
		if k.Broker == broker {
			c.failures.Remove(k)
		}
	}
}

// NextFetch returns the earliest time a failed catalog of the broker may
// be fetched again, or the zero time when none is backing off at now.
func (c *Cache) NextFetch(broker string, now time.Time) time.Time {
	var next time.Time
	for _, k := range c.failures.Keys() {
		if k.Broker != broker {
			continue
		}
		if ff := c.backingOff(k, now); ff != nil && (next.IsZero() || ff.next.Before(next)) {
			next = ff.next
		}
	}
	return next
}
