package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
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
	brokerProtectionStatus                 // the cap and the breaker
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

// brokerProtectionStatus is a broker's cap and breaker in GET /admin/brokers,
// flattened into its row.
type brokerProtectionStatus struct {
	// MaxInFlight is brokers[].max_in_flight (0: no cap) and
	// QueueTimeoutSeconds its queue_timeout.
	MaxInFlight         int     `json:"max_in_flight"`
	QueueTimeoutSeconds float64 `json:"queue_timeout_seconds"`
	// InFlight and Queued are the calls holding a slot and waiting for
	// one; nil without a cap (the calls are not counted).
	InFlight *int `json:"in_flight,omitempty"`
	Queued   *int `json:"queued,omitempty"`
	// Breaker is the circuit breaker; nil without one.
	Breaker *breakerStatus `json:"breaker,omitempty"`
}

// breakerStatus is a breaker in GET /admin/brokers.
type breakerStatus struct {
	State          string  `json:"state"` // closed, half_open, open
	Failures       int     `json:"failures"`
	OpenForSeconds float64 `json:"open_for_seconds"`
	Probes         int     `json:"probes"`
	// The counts since the last transition (gobreaker.Counts).
	Requests             uint32 `json:"requests"`
	ConsecutiveFailures  uint32 `json:"consecutive_failures"`
	ConsecutiveSuccesses uint32 `json:"consecutive_successes"`
	TotalFailures        uint32 `json:"total_failures"`
	TotalSuccesses       uint32 `json:"total_successes"`
	Transitions          int64  `json:"transitions"`
	// ChangedAt is the last transition; RetryAfterSeconds, while open,
	// how long until probes are let through.
	ChangedAt         *time.Time `json:"changed_at,omitempty"`
	RetryAfterSeconds int64      `json:"retry_after_seconds,omitempty"`
	LastError         string     `json:"last_error,omitempty"`
	LastErrorAt       *time.Time `json:"last_error_at,omitempty"`
}

// timeOrNil is &t, or nil for the zero time.
func timeOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// viewBroker is b as a row of GET /admin/brokers.
func viewBroker(b proxy.BrokerInfo) brokerStatus {
	bs := brokerStatus{Name: b.Name, URL: b.URL, APIVersion: b.APIVersions, Hits: b.CatalogHits, Misses: b.CatalogMisses,
		StaleServes: b.StaleServes, LastFetch: timeOrNil(b.CatalogFetched), LastError: b.CatalogError,
		NextFetch: timeOrNil(b.CatalogNextFetch), Catalogs: make([]catalogStatus, 0, len(b.Cached))}
	for _, c := range b.Cached {
		bs.Catalogs = append(bs.Catalogs, catalogStatus{Version: c.Version, Platform: c.Platform, Bytes: c.Bytes,
			AgeSeconds: c.Age.Seconds(), Fresh: c.Fresh, ETag: c.ETag, LastModified: c.LastModified})
	}
	if b.InFlight >= 0 {
		inFlight, queued := b.InFlight, b.Queued
		bs.MaxInFlight, bs.QueueTimeoutSeconds = b.MaxInFlight, b.QueueTimeout.Seconds()
		bs.InFlight, bs.Queued = &inFlight, &queued
	}
	if br := b.BreakerInfo; br != nil {
		bs.Breaker = &breakerStatus{State: br.State, Failures: br.Failures, OpenForSeconds: br.OpenFor.Seconds(), Probes: br.Probes,
			Requests: br.Requests, ConsecutiveFailures: br.ConsecutiveFailures, ConsecutiveSuccesses: br.ConsecutiveSuccesses,
			TotalFailures: br.TotalFailures, TotalSuccesses: br.TotalSuccesses, Transitions: br.Transitions,
			ChangedAt: timeOrNil(br.ChangedAt), RetryAfterSeconds: br.RetryAfterSeconds, LastError: br.LastError,
			LastErrorAt: timeOrNil(br.LastErrorAt)}
	}
	return bs
}

// mountCatalogs adds the catalog control routes:
//
//	GET  /admin/brokers                           each broker of the current configuration with its cache counters and cached catalogs, its cap and its breaker
//	POST /admin/brokers/{broker}/catalog/refresh  fetch the broker's catalogs again now, whatever the backoff after failed fetches, and answer with the result
//
// and the catalog drift routes (drift.go).
func (a *Admin) mountCatalogs() {
	a.handle("GET /admin/brokers", func(r *http.Request, v *proxy.View) (any, string, error) {
		brokers := v.Brokers()
		bs := make([]brokerStatus, 0, len(brokers))
		for _, b := range brokers {
			bs = append(bs, viewBroker(b))
		}
		return map[string]any{"brokers": bs}, fmt.Sprintf("listed %d brokers", len(bs)), nil
	})
	a.handle("POST /admin/brokers/{broker}/catalog/refresh", func(r *http.Request, v *proxy.View) (any, string, error) {
		name := r.PathValue("broker")
		b, n, err := v.RefreshCatalog(r.Context(), name)
		switch {
		case errors.Is(err, proxy.ErrNoBroker):
			return nil, "", osb.Errorf(http.StatusNotFound, "", "no broker named %q in the configuration", name)
		case err != nil:
			return nil, "", &osb.Error{Status: http.StatusBadGateway, Err: err, Description: fmt.Sprintf(
				"refreshing the catalog of broker %q failed: see catalog_last_error in GET /admin/brokers; the cause is in the gateway's log", name)}
		}
		return viewBroker(b), fmt.Sprintf("refreshed %d catalogs", n), nil
	})
	a.mountDrift()
}
