package proxy

import "maps"

// Counts returns the cache's hits, misses and stale serves per broker,
// for the metrics (Metrics.ObserveCatalogs); nil for a nil cache.
func (cc *CatalogCache) Counts() map[string]CatalogCounts {
	if cc == nil {
		return nil
	}
	cc.mu.Lock()
	stats := maps.Clone(cc.stats)
	cc.mu.Unlock()
	out := make(map[string]CatalogCounts, len(stats))
	for name, st := range stats {
		out[name] = CatalogCounts{Hits: st.hits.Load(), Misses: st.misses.Load(), Stale: st.stale.Load()}
	}
	return out
}
