package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Live instances per tenant, broker, service and plan:
// osb_gateway_instances. The counts are read at scrape time, at most once
// per InstancesRefresh and within instancesTimeout, by a listing of the
// inventory's instances (a page at a time): the store keeps counts per
// broker and tenant only, and a counter per plan would cost every write.
// Scrapes between two reads show the last counts, so the listing runs
// once a minute whatever the scrapers; a million instances take a few
// seconds of a background read (no write waits for it).

// InstancesRefresh is the longest the counts of live instances are
// reused for.
const InstancesRefresh = time.Minute

// instancesTimeout bounds one read of the counts.
const instancesTimeout = 30 * time.Second

// InstanceCount is the number of live instances of one tenant's plan.
type InstanceCount struct {
	Tenant, Broker, Service, Plan string
	Live                          int
}

// InstanceCounts returns the live instances per tenant, broker, service
// and plan.
type InstanceCounts func(ctx context.Context) ([]InstanceCount, error)

// ObserveInstances makes scrapes show osb_gateway_instances from counts
// (see InstancesRefresh); an error keeps the last counts shown and counts
// as a store error of op "inventory". A later call replaces counts; nil
// shows none.
func (m *Metrics) ObserveInstances(counts InstanceCounts) {
	if m == nil {
		return
	}
	m.instances.reads.Set(counts)
}

// instancesCollector shows the last counts read (CachedRead).
type instancesCollector struct {
	desc  *prometheus.Desc
	reads *CachedRead[[]InstanceCount]
}

func newInstancesCollector(now func() time.Time, errs *prometheus.CounterVec) *instancesCollector {
	return &instancesCollector{reads: NewCachedRead[[]InstanceCount](now, InstancesRefresh, instancesTimeout, errs, "inventory"),
		desc: prometheus.NewDesc("osb_gateway_instances",
			"Live service instances in the inventory, by tenant, broker, service id and plan id; read at most once a minute.",
			[]string{"tenant", "broker", "service", "plan"}, nil)}
}

// Describe implements prometheus.Collector.
func (c *instancesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *instancesCollector) Collect(ch chan<- prometheus.Metric) {
	last, _ := c.reads.Get()
	for _, n := range last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Live), n.Tenant, n.Broker, n.Service, n.Plan)
	}
}
