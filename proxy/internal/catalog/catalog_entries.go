package catalog

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// The cache's entries: putting a fetched catalog in, forgetting a broker's,
// and refreshing one in the background.

// Refresh fetches the broker's catalogs again now, waiting for the
// result: those cached, those whose latest fetch failed (a remembered
// failure does not hold them back) and those it refused, or, with none of
// these, the one at version.
func (c *Cache) Refresh(ctx context.Context, up *upstream.Upstream, version string) ([]*Entry, error) {
	var keys []Key
	for _, k := range c.Entries.Keys() {
		if k.Broker == up.Name {
			keys = append(keys, k)
		}
	}
	for _, k := range c.failures.Keys() {
		if k.Broker == up.Name && !c.Entries.Contains(k) {
			keys = append(keys, k)
		}
	}
	for _, k := range c.refusals.Keys() {
		if k.Broker == up.Name && !c.Entries.Contains(k) && !c.failures.Contains(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		keys = []Key{{Broker: up.Name, Version: version}}
	}
	var out []*Entry
	var errs []error
	for _, k := range keys {
		prev, _ := c.Entries.Peek(k)
		e, err := c.Load(ctx, Fetch{Up: up, Key: k, ReqID: core.NewRequestID(), Force: true}, prev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// Forget drops every entry, remembered failure and refusal of the named
// broker (its settings changed).
func (c *Cache) Forget(broker string) {
	for _, k := range c.Entries.Keys() {
		if k.Broker == broker {
			c.Entries.Remove(k)
		}
	}
	for _, k := range c.refusals.Keys() {
		if k.Broker == broker {
			c.refusals.Remove(k)
		}
	}
	c.forgetFailures(broker)
}

// put stores e, evicting the least recently used entries while the cache
// holds more than maxBytes.
func (c *Cache) put(e *Entry) {
	c.Entries.Add(e.key, e)
	c.bytes.Add(int64(len(e.Body)))
	for c.maxBytes > 0 && c.bytes.Load() > c.maxBytes && c.Entries.Len() > 1 {
		c.Entries.RemoveOldest()
	}
}

// FetchFor is the cache key and fetch details of the request's
// catalog.
func FetchFor(r *http.Request, s *core.Scope) Fetch {
	return FetchOf(r, s, upstream.Of(s.Route), s.Forward)
}

// FetchOf is the cache key and fetch details of up's catalog at
// the version forward, for the request.
func FetchOf(r *http.Request, s *core.Scope, up *upstream.Upstream, forward string) Fetch {
	f := Fetch{Up: up, Key: Key{Broker: up.Name, Version: forward}, ReqID: s.RequestID, TraceParent: s.TraceParent}
	if up.Cfg.Catalog.VaryByPlatform {
		f.Identity = core.HeaderValue(r.Header, core.HeaderOriginatingIdentity)
		f.Key.Platform, _, _ = strings.Cut(f.Identity, " ")
	}
	return f
}
