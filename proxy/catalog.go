package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// CatalogCache holds broker catalogs per broker, forwarded API version and
// (for brokers with vary_by_platform) originating platform. It outlives
// reloads: a Gateway built by a reload shares its predecessor's cache, and
// drops only the entries of brokers whose settings changed.
//
// Entries are bounded by count and total bytes (least recently used go
// first). Concurrent misses share one broker fetch. An entry past its TTL is
// served while one background refresh runs; a broker that is down or
// answers an invalid catalog leaves the last good catalog in place, served
// with a Warning header. A failed fetch is remembered: the next fetch of
// that catalog on a platform call's behalf waits for the broker's
// catalog.retry_interval (doubling up to catalog.retry_max_interval while
// failures continue), and calls in between get the remembered failure at
// once. It is safe for concurrent use.
type CatalogCache struct {
	entries  *lru.Cache[catalogKey, *catalogEntry]
	failures *lru.Cache[catalogKey, *fetchFailure]   // bounded like entries: platforms name keys
	refusals *lru.Cache[catalogKey, *versionRefusal] // the versions a broker refuses (catalog_refusal.go)
	maxBytes int64
	bytes    atomic.Int64
	flight   singleflight.Group
	now      func() time.Time
	log      *slog.Logger

	mu    sync.Mutex
	stats map[string]*catalogStats // by broker name

	drift atomic.Pointer[driftTracker] // the Gateway built last's (catalog_drift.go); nil: no drift tracking
}

type catalogKey struct {
	broker, version, platform string
}

func (k catalogKey) String() string {
	s := k.broker + "@" + k.version
	if k.platform != "" {
		s += "/" + k.platform
	}
	return s
}

// catalogEntry is one fetched catalog: the broker's bytes and everything
// derived from them, built once. It is immutable but for views and the
// refresh flag.
type catalogEntry struct {
	key          catalogKey
	body         []byte
	index        *rules.Index
	contentType  []string
	etag         []string // strong: a hash of body
	lastModified time.Time
	lastModHdr   []string
	plain        *catalogView // the broker's own bytes, served without a tenant filter
	fetched      time.Time
	expires      time.Time

	refreshing atomic.Bool
	views      sync.Map // filter fingerprint → *catalogView
}

// catalogStats are a broker's cache counters, shown by GET /admin/brokers.
type catalogStats struct {
	hits, misses, stale atomic.Int64
	mu                  sync.Mutex
	lastFetch           time.Time
	lastError           string
	lastErrorAt         time.Time
	fetchedOnce         bool
}

// newCatalogCache returns a cache sized by c; now may be nil (time.Now).
func newCatalogCache(c config.Catalog, log *slog.Logger, now func() time.Time) (*CatalogCache, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	cc := &CatalogCache{maxBytes: c.MaxBytes, now: now, log: log, stats: map[string]*catalogStats{}}
	max := c.MaxEntries
	if max <= 0 {
		max = config.DefaultCatalogMaxEntries
	}
	var err error
	if cc.entries, err = lru.NewWithEvict(max, func(_ catalogKey, e *catalogEntry) { cc.bytes.Add(-int64(len(e.body))) }); err != nil {
		return nil, fmt.Errorf("catalog cache of %d entries: %w", max, err)
	}
	if cc.failures, err = lru.New[catalogKey, *fetchFailure](max); err != nil {
		return nil, fmt.Errorf("catalog failure cache of %d entries: %w", max, err)
	}
	if cc.refusals, err = lru.New[catalogKey, *versionRefusal](max); err != nil {
		return nil, fmt.Errorf("catalog refusal cache of %d entries: %w", max, err)
	}
	return cc, nil
}

func (c *CatalogCache) statsFor(broker string) *catalogStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats[broker]
	if st == nil {
		st = &catalogStats{}
		c.stats[broker] = st
	}
	return st
}

// catalogFetch is what a fetch needs to know about the broker and request.
type catalogFetch struct {
	up       *upstream.Upstream
	key      catalogKey
	identity string // X-Broker-API-Originating-Identity, forwarded when the catalog varies by platform
	reqID    string
	// traceParent is the Scope.TraceParent of the platform call the fetch
	// serves, "" for none (see upstream.ownCall).
	traceParent string
	// force fetches even while a failed fetch of the key is remembered
	// (admin refresh, warm-up, check); platform calls never force.
	force bool
}

// get returns the catalog for f.key: fresh from the cache, stale while a
// refresh runs or after one failed (stale true), or fetched now. When the
// broker refuses f.key's version, it returns the *versionRefusal (cached
// like a catalog). With no good catalog, it returns a 503 *osb.Error
// naming the broker, the cause and when the next fetch may start: at once,
// without asking the broker, while a failed fetch is remembered (see
// backingOff). A stale entry's background refresh waits for the same
// backoff.
func (c *CatalogCache) get(ctx context.Context, f catalogFetch) (e *catalogEntry, stale bool, err error) {
	st := c.statsFor(f.key.broker)
	now := c.now()
	if e, ok := c.entries.Get(f.key); ok {
		if now.Before(e.expires) {
			st.hits.Add(1)
			return e, false, nil
		}
		st.stale.Add(1)
		if c.backingOff(f.key, now) == nil && e.refreshing.CompareAndSwap(false, true) {
			go func() {
				defer e.refreshing.Store(false)
				_, _ = c.load(context.WithoutCancel(ctx), f, e)
			}()
		}
		return e, true, nil
	}
	if v := c.refused(f.key, now); v != nil {
		st.hits.Add(1)
		return nil, false, v
	}
	if ff := c.backingOff(f.key, now); ff != nil {
		return nil, false, unavailable(f.key, ff, now)
	}
	st.misses.Add(1)
	e, err = c.load(ctx, f, nil)
	return e, false, err
}

// load fetches f's catalog once for all concurrent callers and stores it.
// prev is the entry being refreshed, if any: on failure it stays. Unless
// f.force is set, a remembered failure whose backoff has not passed is
// returned without a fetch (checked again inside the shared call, so a
// caller that saw no failure before another's fetch failed does not
// fetch again).
func (c *CatalogCache) load(ctx context.Context, f catalogFetch, prev *catalogEntry) (*catalogEntry, error) {
	key := f.key.String()
	if f.force {
		key += " force" // never answered by a shared call that may skip the fetch
	}
	ch := c.flight.DoChan(key, func() (any, error) {
		if !f.force {
			now := c.now()
			if ff := c.backingOff(f.key, now); ff != nil {
				return nil, unavailable(f.key, ff, now)
			}
		}
		// Detached from the first caller: others wait on the same fetch.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.up.Timeout)
		defer cancel()
		return c.fetch(fctx, f, prev)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*catalogEntry), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch asks the broker for its catalog, checks it and caches it.
func (c *CatalogCache) fetch(ctx context.Context, f catalogFetch, prev *catalogEntry) (*catalogEntry, error) {
	st := c.statsFor(f.key.broker)
	e, err := c.fetchEntry(ctx, f, prev)
	now := c.now()
	var refusal *versionRefusal
	if errors.As(err, &refusal) {
		// The broker answered, for this version: no failure, no backoff.
		c.keepRefusal(refusal)
		st.mu.Lock()
		st.lastFetch, st.lastError = now, ""
		st.mu.Unlock()
		c.log.LogAttrs(ctx, slog.LevelWarn, "broker refuses the API version; platforms at it get its refusal",
			slog.String("broker", f.key.broker), slog.String("version", f.key.version), slog.Int("status", refusal.status),
			slog.String("code", refusal.code), slog.String("description", refusal.description), slog.Time("until", refusal.expires))
		return nil, refusal
	}
	st.mu.Lock()
	st.lastFetch = now
	if err != nil {
		st.lastError, st.lastErrorAt = err.Error(), now
	} else {
		st.lastError, st.fetchedOnce = "", true
	}
	st.mu.Unlock()
	if err != nil {
		// Remembered before it is logged or returned: a call that sees the
		// log line or this fetch's answer finds the backoff in place.
		ff := c.recordFailure(f, err, now)
		msg := "catalog fetch failed; no good catalog to serve"
		if prev == nil {
			if old, ok := c.entries.Peek(f.key); ok {
				prev = old
			}
		}
		if prev != nil {
			msg = "catalog fetch failed; serving the last good catalog"
		}
		// One line per fetch, and fetches wait for the backoff: not one
		// line per platform call.
		c.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("broker", f.key.broker),
			slog.String("version", f.key.version), slog.String("error", err.Error()),
			slog.Int("consecutive_failures", ff.count), slog.Time("next_fetch", ff.next),
			slog.String("without_catalog", withoutCatalogLog(f.up.Cfg.Validation)))
		if prev != nil {
			return nil, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
				Description: fmt.Sprintf("the catalog of broker %q could not be fetched (the last good one is still served): %s", f.key.broker, upstream.Said(err))}
		}
		return nil, unavailable(f.key, ff, now)
	}
	c.failures.Remove(f.key)
	c.refusals.Remove(f.key)
	e = c.observeDrift(ctx, f, e) // the accepted catalog in its place while held
	c.put(e)
	return e, nil
}

func (c *CatalogCache) fetchEntry(ctx context.Context, f catalogFetch, prev *catalogEntry) (*catalogEntry, error) {
	u := f.up
	req, err := http.NewRequestWithContext(u.OwnCall(ctx, rules.Catalog, f.traceParent), http.MethodGet, u.Target.JoinPath("v2", "catalog").String(), nil)
	if err != nil {
		return nil, err
	}
	if u.Auth != nil {
		req.Header["Authorization"] = u.Auth
	}
	req.Header[core.HeaderAPIVersion] = []string{f.key.version}
	req.Header[core.HeaderRequestIdentity] = []string{f.reqID}
	if f.identity != "" {
		req.Header.Set(osb.HeaderOriginatingIdentity, f.identity)
	}
	res, err := u.RT.RoundTrip(req)
	if err != nil {
		if upstream.IsTimeout(err, ctx) {
			return nil, fmt.Errorf("the broker did not answer within %s", u.Timeout)
		}
		return nil, u.Failed(err)
	}
	defer res.Body.Close()
	limit := c.maxBytes
	if limit <= 0 {
		limit = config.DefaultCatalogMaxBytes
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, limit+1))
	if err != nil {
		return nil, &upstream.Withheld{Said: "the broker's catalog could not be read: its body was cut short" + upstream.CutReason(err), Err: err}
	}
	if rules.RefusesVersion(res.StatusCode) && int64(len(body)) <= limit {
		return nil, newVersionRefusal(f.key, res.StatusCode, res.Header.Get("Content-Type"), body, c.now().Add(u.Cfg.Catalog.TTL))
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the broker answered GET /v2/catalog with status %d", res.StatusCode)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("the catalog exceeds catalog.max_bytes (%d bytes)", limit)
	}
	var prevIndex *rules.Index
	if prev != nil {
		prevIndex = prev.index
	}
	index, findings, err := rules.NewIndexFrom(prevIndex, body) // unchanged schemas are not compiled again
	if err != nil {
		return nil, fmt.Errorf("the broker's catalog is not valid: %w", err)
	}
	for _, fd := range findings {
		if fd.Path == "services" && fd.Severity == rules.SeverityError {
			return nil, fmt.Errorf("the broker's catalog is not valid: services: %s", fd.Message)
		}
		if fd.Severity == rules.SeverityError {
			c.log.LogAttrs(ctx, slog.LevelWarn, "catalog finding", slog.String("broker", f.key.broker),
				slog.String("path", fd.Path), slog.String("finding", fd.Message))
		}
	}
	now := c.now()
	sum := sha256.Sum256(body)
	e := &catalogEntry{key: f.key, body: body, index: index, fetched: now, expires: now.Add(u.Cfg.Catalog.TTL),
		etag: []string{`"` + hex.EncodeToString(sum[:16]) + `"`}, lastModified: now.UTC().Truncate(time.Second)}
	if prev != nil && prev.etag[0] == e.etag[0] {
		e.lastModified = prev.lastModified // same content: it did not change
	}
	e.lastModHdr = []string{e.lastModified.Format(http.TimeFormat)}
	e.plain = newCatalogView(e.body, e.etag)
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	e.contentType = []string{ct}
	return e, nil
}
