package metrics

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// StateCounts reports, at scrape time, the operation locks held, the
// asynchronous operations among them and when the oldest lock was taken,
// from one read of the state store; an error skips the gauges and counts
// as a store error of op "observe".
type StateCounts func(ctx context.Context) (StateCount, error)

// StateCount is what one read of the state store found.
type StateCount struct {
	// Locks are the operation locks held, Operations the asynchronous
	// operations among them.
	Locks, Operations int64
	// Oldest is when the oldest lock held was taken; zero when none is.
	Oldest time.Time
}

// ObserveState makes each scrape show the operation locks held and the
// asynchronous operations in progress, both from one call of counts. A
// later call replaces counts; nil shows neither.
func (m *Metrics) ObserveState(counts StateCounts) {
	if m == nil {
		return
	}
	if counts == nil {
		m.state.counts.Store(nil)
		return
	}
	m.state.counts.Store(&counts)
}

// CatalogCounts are one broker's catalog cache counters.
type CatalogCounts struct{ Hits, Misses, Stale int64 }

// ObserveCatalogs makes each scrape show the catalog cache hits, misses
// and stale serves per broker, as current returns them (the current
// Gateway's cache: Switch.Load().Catalogs().Counts). A later call replaces
// current; nil shows none.
func (m *Metrics) ObserveCatalogs(current func() map[string]CatalogCounts) {
	if m == nil {
		return
	}
	if current == nil {
		m.catalogs.current.Store(nil)
		return
	}
	m.catalogs.current.Store(&current)
}

// stateCollector collects the store errors counted so far and, from one
// read of the store per scrape, the locks held and operations in
// progress. The store errors are its own family so that a failed read
// shows in the scrape that made it.
type stateCollector struct {
	errs            *prometheus.CounterVec
	locks, ops, age *prometheus.Desc
	counts          atomic.Pointer[StateCounts] // nil: no gauges
	now             func() time.Time            // the gateway's clock; nil: time.Now
}

func newStateCollector() *stateCollector {
	return &stateCollector{
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_store_errors_total",
			Help: "Failed state store operations, by operation."}, []string{"op"}),
		locks: prometheus.NewDesc("osb_gateway_locks_held", "Operation locks held on service instances.", nil, nil),
		ops:   prometheus.NewDesc("osb_gateway_operations_in_progress", "Asynchronous broker operations the gateway tracks.", nil, nil),
		age: prometheus.NewDesc("osb_gateway_lock_oldest_age_seconds",
			"Age of the oldest operation lock held (0 when none is): an operation that never ends holds its instance until its deadline.", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	c.errs.Describe(ch)
	ch <- c.locks
	ch <- c.ops
	ch <- c.age
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if counts := c.counts.Load(); counts != nil {
		n, err := (*counts)(context.Background())
		if err != nil {
			c.errs.WithLabelValues("observe").Inc()
		} else {
			age := 0.0
			if !n.Oldest.IsZero() {
				now := time.Now
				if c.now != nil {
					now = c.now
				}
				age = max(now().Sub(n.Oldest).Seconds(), 0)
			}
			ch <- prometheus.MustNewConstMetric(c.locks, prometheus.GaugeValue, float64(n.Locks))
			ch <- prometheus.MustNewConstMetric(c.ops, prometheus.GaugeValue, float64(n.Operations))
			ch <- prometheus.MustNewConstMetric(c.age, prometheus.GaugeValue, age)
		}
	}
	c.errs.Collect(ch)
}

// catalogCollector reads the catalog cache counters per broker at each
// scrape.
type catalogCollector struct {
	hits, misses, stale *prometheus.Desc
	current             atomic.Pointer[func() map[string]CatalogCounts] // nil: no series
}

func newCatalogCollector() *catalogCollector {
	broker := []string{"broker"}
	return &catalogCollector{
		hits:   prometheus.NewDesc("osb_gateway_catalog_hits_total", "Catalog requests answered from a fresh cache entry.", broker, nil),
		misses: prometheus.NewDesc("osb_gateway_catalog_misses_total", "Catalog requests that fetched from the broker.", broker, nil),
		stale:  prometheus.NewDesc("osb_gateway_catalog_stale_total", "Catalog requests answered from a stale entry.", broker, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *catalogCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hits
	ch <- c.misses
	ch <- c.stale
}

// Collect implements prometheus.Collector.
func (c *catalogCollector) Collect(ch chan<- prometheus.Metric) {
	current := c.current.Load()
	if current == nil {
		return
	}
	for name, st := range (*current)() {
		ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.Hits), name)
		ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(st.Misses), name)
		ch <- prometheus.MustNewConstMetric(c.stale, prometheus.CounterValue, float64(st.Stale), name)
	}
}
