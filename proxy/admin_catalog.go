package proxy

import (
	"net/http"
	"sort"
	"time"
)

// brokerStatus is one row of GET /admin/brokers.
type brokerStatus struct {
	Name        string          `json:"name"`
	URL         string          `json:"url"`
	APIVersion  string          `json:"api_version"`
	Hits        int64           `json:"catalog_hits"`
	Misses      int64           `json:"catalog_misses"`
	StaleServes int64           `json:"catalog_stale_serves"`
	LastFetch   *time.Time      `json:"catalog_last_fetch,omitempty"`
	LastError   string          `json:"catalog_last_error,omitempty"`
	Catalogs    []catalogStatus `json:"catalogs"`
}

// catalogStatus describes one cached catalog of a broker.
type catalogStatus struct {
	Version      string    `json:"version"`
	Platform     string    `json:"platform,omitempty"`
	Bytes        int       `json:"bytes"`
	AgeSeconds   float64   `json:"age_seconds"`
	Fresh        bool      `json:"fresh"`
	ETag         string    `json:"etag"`
	LastModified time.Time `json:"last_modified"`
}

// MountCatalogAdmin adds the catalog control endpoints to a:
// GET /admin/brokers lists each broker of the current configuration with
// its cache counters and cached catalogs; POST
// /admin/brokers/{name}/catalog/refresh fetches the broker's catalogs again
// now and answers with the result.
func (a *Admin) MountCatalogAdmin(sw *Switch) {
	a.mux.HandleFunc("GET /admin/brokers", func(w http.ResponseWriter, r *http.Request) {
		g := sw.Load()
		writeJSON(w, http.StatusOK, map[string]any{"brokers": g.brokerStatuses()})
	})
	a.mux.HandleFunc("POST /admin/brokers/{name}/catalog/refresh", func(w http.ResponseWriter, r *http.Request) {
		g := sw.Load()
		u := g.upstreams[r.PathValue("name")]
		if u == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no broker named " + r.PathValue("name")})
			return
		}
		if _, err := g.catalogs.refresh(r.Context(), u, u.warmVersion().String()); err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, g.brokerStatus(u))
	})
}

func (g *Gateway) brokerStatuses() []brokerStatus {
	out := make([]brokerStatus, 0, len(g.cfg.Brokers))
	for _, b := range g.cfg.Brokers {
		out = append(out, g.brokerStatus(g.upstreams[b.Name]))
	}
	return out
}

func (g *Gateway) brokerStatus(u *upstream) brokerStatus {
	c := g.catalogs
	st := c.statsFor(u.name)
	bs := brokerStatus{Name: u.name, URL: u.target.String(), APIVersion: u.min.String() + " to " + u.max.String(),
		Hits: st.hits.Load(), Misses: st.misses.Load(), StaleServes: st.stale.Load(), Catalogs: []catalogStatus{}}
	st.mu.Lock()
	if !st.lastFetch.IsZero() {
		t := st.lastFetch
		bs.LastFetch = &t
	}
	bs.LastError = st.lastError
	st.mu.Unlock()
	now := c.now()
	for _, k := range c.entries.Keys() {
		if k.broker != u.name {
			continue
		}
		if e, ok := c.entries.Peek(k); ok {
			bs.Catalogs = append(bs.Catalogs, catalogStatus{Version: k.version, Platform: k.platform, Bytes: len(e.body),
				AgeSeconds: now.Sub(e.fetched).Seconds(), Fresh: now.Before(e.expires), ETag: e.etag[0], LastModified: e.lastModified})
		}
	}
	sort.Slice(bs.Catalogs, func(i, j int) bool { return bs.Catalogs[i].Version < bs.Catalogs[j].Version })
	return bs
}
