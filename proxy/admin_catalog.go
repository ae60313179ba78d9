package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// brokerStatus is one row of GET /admin/brokers.
type brokerStatus struct {
	Name        string     `json:"name"`
	URL         string     `json:"url"`
	APIVersion  string     `json:"api_version"`
	Hits        int64      `json:"catalog_hits"`
	Misses      int64      `json:"catalog_misses"`
	StaleServes int64      `json:"catalog_stale_serves"`
	LastFetch   *time.Time `json:"catalog_last_fetch,omitempty"`
	LastError   string     `json:"catalog_last_error,omitempty"`
	// NextFetch is, while a failed fetch is remembered, the earliest time
	// the gateway fetches one of the broker's catalogs again on its own.
	NextFetch              *time.Time      `json:"catalog_next_fetch,omitempty"`
	Catalogs               []catalogStatus `json:"catalogs"`
	brokerProtectionStatus                 // the cap and the breaker (admin_brokerprotect.go)
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

// MountCatalogAdmin adds the catalog control routes to a, behind the
// admin token (see control), logging each call to log (nil: slog.Default()):
//
//	GET  /admin/brokers                           each broker of the current configuration with its cache counters and cached catalogs, its cap and its breaker
//	POST /admin/brokers/{broker}/catalog/refresh  fetch the broker's catalogs again now, whatever the backoff after failed fetches, and answer with the result
//
// and the catalog drift routes (admin_drift.go).
func (a *Admin) MountCatalogAdmin(sw *Switch, log *slog.Logger) {
	a.bind(sw, log)
	a.handleControl("GET /admin/brokers", func(r *http.Request, g *Gateway) (any, string, error) {
		bs := g.brokerStatuses()
		return map[string]any{"brokers": bs}, fmt.Sprintf("listed %d brokers", len(bs)), nil
	})
	a.handleControl("POST /admin/brokers/{broker}/catalog/refresh", func(r *http.Request, g *Gateway) (any, string, error) {
		name := r.PathValue("broker")
		u := g.upstreams[name]
		if u == nil {
			return nil, "", osb.Errorf(http.StatusNotFound, "", "no broker named %q in the configuration", name)
		}
		entries, err := g.catalogs.refresh(r.Context(), u, u.warmVersion().String())
		if err != nil {
			return nil, "", &osb.Error{Status: http.StatusBadGateway, Err: err, Description: fmt.Sprintf(
				"refreshing the catalog of broker %q failed: see catalog_last_error in GET /admin/brokers; the cause is in the gateway's log", name)}
		}
		return g.brokerStatus(u), fmt.Sprintf("refreshed %d catalogs", len(entries)), nil
	})
	a.mountDriftAdmin()
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
	if next := c.nextFetch(u.name, now); !next.IsZero() {
		bs.NextFetch = &next
	}
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
	bs.brokerProtectionStatus = g.brokerProtect[u.name].status()
	return bs
}
