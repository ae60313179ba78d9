package catalog

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

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Cache holds broker catalogs per broker, forwarded API version and
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
type Cache struct {
	Entries  *lru.Cache[Key, *Entry]
	failures *lru.Cache[Key, *fetchFailure]   // bounded like entries: platforms name keys
	refusals *lru.Cache[Key, *VersionRefusal] // the versions a broker refuses (catalog_refusal.go)
	maxBytes int64
	bytes    atomic.Int64
	flight   singleflight.Group
	Now      func() time.Time
	log      *slog.Logger

	mu    sync.Mutex
	stats map[string]*Stats // by broker name

	drift atomic.Pointer[DriftTracker] // the Gateway built last's (catalog_drift.go); nil: no drift tracking
}

type Key struct {
	Broker, Version, Platform string
}

func (k Key) String() string {
	s := k.Broker + "@" + k.Version
	if k.Platform != "" {
		s += "/" + k.Platform
	}
	return s
}

// Entry is one fetched catalog: the broker's bytes and everything
// derived from them, built once. It is immutable but for views and the
// refresh flag.
type Entry struct {
	key          Key
	Body         []byte
	Rules        *rules.Index
	ContentType  []string
	Etag         []string // strong: a hash of body
	LastModified time.Time
	LastModHdr   []string
	plain        *TenantView // the broker's own bytes, served without a tenant filter
	Fetched      time.Time
	Expires      time.Time

	Refreshing atomic.Bool
	Views      sync.Map // filter fingerprint → *TenantView
}

// Stats are a broker's cache counters, shown by GET /admin/brokers.
type Stats struct {
	Hits, Misses, Stale atomic.Int64
	Mu                  sync.Mutex
	LastFetch           time.Time
	LastError           string
	lastErrorAt         time.Time
	FetchedOnce         bool
}

// NewCache returns a cache sized by c; now may be nil (time.Now).
func NewCache(c config.Catalog, log *slog.Logger, now func() time.Time) (*Cache, error) {
	if now == nil {
		now = time.Now
	}
	if log == nil {
		log = slog.Default()
	}
	cc := &Cache{maxBytes: c.MaxBytes, Now: now, log: log, stats: map[string]*Stats{}}
	max := c.MaxEntries
	if max <= 0 {
		max = config.DefaultCatalogMaxEntries
	}
	var err error
	if cc.Entries, err = lru.NewWithEvict(max, func(_ Key, e *Entry) { cc.bytes.Add(-int64(len(e.Body))) }); err != nil {
		return nil, fmt.Errorf("catalog cache of %d entries: %w", max, err)
	}
	if cc.failures, err = lru.New[Key, *fetchFailure](max); err != nil {
		return nil, fmt.Errorf("catalog failure cache of %d entries: %w", max, err)
	}
	if cc.refusals, err = lru.New[Key, *VersionRefusal](max); err != nil {
		return nil, fmt.Errorf("catalog refusal cache of %d entries: %w", max, err)
	}
	return cc, nil
}

func (c *Cache) StatsFor(broker string) *Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats[broker]
	if st == nil {
		st = &Stats{}
		c.stats[broker] = st
	}
	return st
}

// Fetch is what a fetch needs to know about the broker and request.
type Fetch struct {
	Up       *upstream.Upstream
	Key      Key
	Identity string // X-Broker-API-Originating-Identity, forwarded when the catalog varies by platform
	ReqID    string
	// traceParent is the Scope.TraceParent of the platform call the fetch
	// serves, "" for none (see upstream.ownCall).
	TraceParent string
	// force fetches even while a failed fetch of the key is remembered
	// (admin refresh, warm-up, check); platform calls never force.
	Force bool
}

// Get returns the catalog for f.key: fresh from the cache, stale while a
// refresh runs or after one failed (stale true), or fetched now. When the
// broker refuses f.key's version, it returns the *versionRefusal (cached
// like a catalog). With no good catalog, it returns a 503 *osb.Error
// naming the broker, the cause and when the next fetch may start: at once,
// without asking the broker, while a failed fetch is remembered (see
// backingOff). A stale entry's background refresh waits for the same
// backoff.
func (c *Cache) Get(ctx context.Context, f Fetch) (e *Entry, stale bool, err error) {
	st := c.StatsFor(f.Key.Broker)
	now := c.Now()
	if e, ok := c.Entries.Get(f.Key); ok {
		if now.Before(e.Expires) {
			st.Hits.Add(1)
			return e, false, nil
		}
		st.Stale.Add(1)
		if c.backingOff(f.Key, now) == nil && e.Refreshing.CompareAndSwap(false, true) {
			go func() {
				defer e.Refreshing.Store(false)
				_, _ = c.Load(context.WithoutCancel(ctx), f, e)
			}()
		}
		return e, true, nil
	}
	if v := c.refused(f.Key, now); v != nil {
		st.Hits.Add(1)
		return nil, false, v
	}
	if ff := c.backingOff(f.Key, now); ff != nil {
		return nil, false, unavailable(f.Key, ff, now)
	}
	st.Misses.Add(1)
	e, err = c.Load(ctx, f, nil)
	return e, false, err
}

// Load fetches f's catalog once for all concurrent callers and stores it.
// prev is the entry being refreshed, if any: on failure it stays. Unless
// f.force is set, a remembered failure whose backoff has not passed is
// returned without a fetch (checked again inside the shared call, so a
// caller that saw no failure before another's fetch failed does not
// fetch again).
func (c *Cache) Load(ctx context.Context, f Fetch, prev *Entry) (*Entry, error) {
	key := f.Key.String()
	if f.Force {
		key += " force" // never answered by a shared call that may skip the fetch
	}
	ch := c.flight.DoChan(key, func() (any, error) {
		if !f.Force {
			now := c.Now()
			if ff := c.backingOff(f.Key, now); ff != nil {
				return nil, unavailable(f.Key, ff, now)
			}
		}
		// Detached from the first caller: others wait on the same fetch.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.Up.Timeout)
		defer cancel()
		return c.fetch(fctx, f, prev)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*Entry), nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fetch asks the broker for its catalog, checks it and caches it.
func (c *Cache) fetch(ctx context.Context, f Fetch, prev *Entry) (*Entry, error) {
	st := c.StatsFor(f.Key.Broker)
	e, err := c.FetchEntry(ctx, f, prev)
	now := c.Now()
	var refusal *VersionRefusal
	if errors.As(err, &refusal) {
		// The broker answered, for this version: no failure, no backoff.
		c.keepRefusal(refusal)
		st.Mu.Lock()
		st.LastFetch, st.LastError = now, ""
		st.Mu.Unlock()
		c.log.LogAttrs(ctx, slog.LevelWarn, "broker refuses the API version; platforms at it get its refusal",
			slog.String("broker", f.Key.Broker), slog.String("version", f.Key.Version), slog.Int("status", refusal.status),
			slog.String("code", refusal.code), slog.String("description", refusal.Description), slog.Time("until", refusal.expires))
		return nil, refusal
	}
	st.Mu.Lock()
	st.LastFetch = now
	if err != nil {
		st.LastError, st.lastErrorAt = err.Error(), now
	} else {
		st.LastError, st.FetchedOnce = "", true
	}
	st.Mu.Unlock()
	if err != nil {
		// Remembered before it is logged or returned: a call that sees the
		// log line or this fetch's answer finds the backoff in place.
		ff := c.recordFailure(f, err, now)
		msg := "catalog fetch failed; no good catalog to serve"
		if prev == nil {
			if old, ok := c.Entries.Peek(f.Key); ok {
				prev = old
			}
		}
		if prev != nil {
			msg = "catalog fetch failed; serving the last good catalog"
		}
		// One line per fetch, and fetches wait for the backoff: not one
		// line per platform call.
		c.log.LogAttrs(ctx, slog.LevelWarn, msg, slog.String("broker", f.Key.Broker),
			slog.String("version", f.Key.Version), slog.String("error", err.Error()),
			slog.Int("consecutive_failures", ff.count), slog.Time("next_fetch", ff.next),
			slog.String("without_catalog", withoutCatalogLog(f.Up.Cfg.Validation)))
		if prev != nil {
			return nil, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
				Description: fmt.Sprintf("the catalog of broker %q could not be fetched (the last good one is still served): %s", f.Key.Broker, upstream.Said(err))}
		}
		return nil, unavailable(f.Key, ff, now)
	}
	c.failures.Remove(f.Key)
	c.refusals.Remove(f.Key)
	e = c.observeDrift(ctx, f, e) // the accepted catalog in its place while held
	c.put(e)
	return e, nil
}

func (c *Cache) FetchEntry(ctx context.Context, f Fetch, prev *Entry) (*Entry, error) {
	u := f.Up
	req, err := http.NewRequestWithContext(u.OwnCall(ctx, rules.Catalog, f.TraceParent), http.MethodGet, u.Target.JoinPath("v2", "catalog").String(), nil)
	if err != nil {
		return nil, err
	}
	if u.Auth != nil {
		req.Header["Authorization"] = u.Auth
	}
	req.Header[core.HeaderAPIVersion] = []string{f.Key.Version}
	req.Header[core.HeaderRequestIdentity] = []string{f.ReqID}
	if f.Identity != "" {
		req.Header.Set(osb.HeaderOriginatingIdentity, f.Identity)
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
		return nil, newVersionRefusal(f.Key, res.StatusCode, res.Header.Get("Content-Type"), body, c.Now().Add(u.Cfg.Catalog.TTL))
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the broker answered GET /v2/catalog with status %d", res.StatusCode)
	}
	if int64(len(body)) > limit {
		return nil, fmt.Errorf("the catalog exceeds catalog.max_bytes (%d bytes)", limit)
	}
	var prevIndex *rules.Index
	if prev != nil {
		prevIndex = prev.Rules
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
			c.log.LogAttrs(ctx, slog.LevelWarn, "catalog finding", slog.String("broker", f.Key.Broker),
				slog.String("path", fd.Path), slog.String("finding", fd.Message))
		}
	}
	now := c.Now()
	sum := sha256.Sum256(body)
	e := &Entry{key: f.Key, Body: body, Rules: index, Fetched: now, Expires: now.Add(u.Cfg.Catalog.TTL),
		Etag: []string{`"` + hex.EncodeToString(sum[:16]) + `"`}, LastModified: now.UTC().Truncate(time.Second)}
	if prev != nil && prev.Etag[0] == e.Etag[0] {
		e.LastModified = prev.LastModified // same content: it did not change
	}
	e.LastModHdr = []string{e.LastModified.Format(http.TimeFormat)}
	e.plain = NewTenantView(e.Body, e.Etag)
	ct := res.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	e.ContentType = []string{ct}
	return e, nil
}
