package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bindings expiring soon, per broker: osb_gateway_bindings_expiring.
//
// The count is read from the store's expiry index at scrape time, at most
// once per ExpiringRefresh and within expiringTimeout: scrapes between two
// reads show the last counts. Expiry is a matter of days, so a minute-old
// count costs nothing in accuracy, and the store is read once a minute
// whatever the number of scrapers and their interval. The read costs no
// record: Redis counts a range per broker; bolt and memory walk the index
// entries of the bindings expiring within the window (not the others).

// ExpiringRefresh is the longest a count of expiring bindings is reused
// for.
const ExpiringRefresh = time.Minute

// expiringTimeout bounds one read of the counts.
const expiringTimeout = 5 * time.Second

// ExpiringCounts returns how many bindings expire within
// inventory.expiry_warning, per broker; every configured broker is in the
// map (zero when it has none), so that the series exist from the start.
type ExpiringCounts func(ctx context.Context) (map[string]int, error)

// ObserveExpiring makes scrapes show osb_gateway_bindings_expiring from
// counts (see ExpiringRefresh); an error keeps the last counts shown and
// counts as a store error of op "expiring". A later call replaces counts
// (and forgets the last ones); nil shows none.
func (m *Metrics) ObserveExpiring(counts ExpiringCounts) {
	if m == nil {
		return
	}
	m.expiring.reads.Set(counts)
}

// expiringCollector shows the last counts read (CachedRead).
type expiringCollector struct {
	desc  *prometheus.Desc
	reads *CachedRead[map[string]int]
}

func newExpiringCollector(now func() time.Time, errs *prometheus.CounterVec) *expiringCollector {
	return &expiringCollector{reads: NewCachedRead[map[string]int](now, ExpiringRefresh, expiringTimeout, errs, "expiring"),
		desc: prometheus.NewDesc("osb_gateway_bindings_expiring",
			"Bindings whose expires_at falls within inventory.expiry_warning (or is past), per broker; read at most once a minute.",
			[]string{"broker"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *expiringCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *expiringCollector) Collect(ch chan<- prometheus.Metric) {
	last, _ := c.reads.Get()
	for broker, n := range last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), broker)
	}
}
