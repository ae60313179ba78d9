package proxy

import (
	"context"
	"errors"

	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// The cache's entries: putting a fetched catalog in, forgetting a broker's,
// and refreshing one in the background.

// refresh fetches the broker's catalogs again now, waiting for the
// result: those cached, those whose latest fetch failed (a remembered
// failure does not hold them back) and those it refused, or, with none of
// these, the one at version.
func (c *CatalogCache) refresh(ctx context.Context, up *upstream.Upstream, version string) ([]*catalogEntry, error) {
	var keys []catalogKey
	for _, k := range c.entries.Keys() {
		if k.broker == up.Name {
			keys = append(keys, k)
		}
	}
	for _, k := range c.failures.Keys() {
		if k.broker == up.Name && !c.entries.Contains(k) {
			keys = append(keys, k)
		}
	}
	for _, k := range c.refusals.Keys() {
		if k.broker == up.Name && !c.entries.Contains(k) && !c.failures.Contains(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		keys = []catalogKey{{broker: up.Name, version: version}}
	}
	var out []*catalogEntry
	var errs []error
	for _, k := range keys {
		prev, _ := c.entries.Peek(k)
		e, err := c.load(ctx, catalogFetch{up: up, key: k, reqID: core.NewRequestID(), force: true}, prev)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, e)
	}
	return out, errors.Join(errs...)
}

// forget drops every entry, remembered failure and refusal of the named
// broker (its settings changed).
func (c *CatalogCache) forget(broker string) {
	for _, k := range c.entries.Keys() {
		if k.broker == broker {
			c.entries.Remove(k)
		}
	}
	for _, k := range c.refusals.Keys() {
		if k.broker == broker {
			c.refusals.Remove(k)
		}
	}
	c.forgetFailures(broker)
}

// put stores e, evicting the least recently used entries while the cache
// holds more than maxBytes.
func (c *CatalogCache) put(e *catalogEntry) {
	c.entries.Add(e.key, e)
	c.bytes.Add(int64(len(e.body)))
	for c.maxBytes > 0 && c.bytes.Load() > c.maxBytes && c.entries.Len() > 1 {
		c.entries.RemoveOldest()
	}
}
