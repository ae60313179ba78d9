package catalog

import (
	"maps"

	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// Counts returns the cache's hits, misses and stale serves per broker,
// for the metrics (Metrics.ObserveCatalogs); nil for a nil cache.
func (cc *Cache) Counts() map[string]metrics.CatalogCounts {
	if cc == nil {
		return nil
	}
	cc.mu.Lock()
	stats := maps.Clone(cc.stats)
	cc.mu.Unlock()
	out := make(map[string]metrics.CatalogCounts, len(stats))
	for name, st := range stats {
		out[name] = metrics.CatalogCounts{Hits: st.Hits.Load(), Misses: st.Misses.Load(), Stale: st.Stale.Load()}
	}
	return out
}
