package proxy

import "github.com/prometheus/client_golang/prometheus"

// protectMetrics count what the protections refused. Their series are
// made when a Gateway is built, for every route (and every limit it is
// under), so that they read 0 from the start rather than appear with the
// first refusal.
type protectMetrics struct {
	limited *prometheus.CounterVec // tenant, broker, class, limit
	shed    *prometheus.CounterVec // tenant, broker, class
	owner   *prometheus.CounterVec // tenant, broker
}

func newProtectMetrics() protectMetrics {
	return protectMetrics{
		limited: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_rate_limited_total",
			Help: "Platform calls refused by a rate limit, by tenant, broker, class (reads or mutations) and the limit that refused them (tenant or route)."},
			[]string{"tenant", "broker", "class", "limit"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_shed_total",
			Help: "Platform calls refused at once because listen.max_in_flight calls were in flight, by tenant, broker and class (reads or mutations)."},
			[]string{"tenant", "broker", "class"}),
		owner: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_owner_refused_total",
			Help: "Platform calls refused because they named a service instance another tenant owns, by the calling tenant and broker (owner.go)."},
			[]string{"tenant", "broker"}),
	}
}

// ownerRefused counts a call of tenant to broker refused because its
// instance is another tenant's; nothing for a nil m.
func (m *Metrics) ownerRefused(tenant, broker string) {
	if m == nil {
		return
	}
	m.protect.owner.WithLabelValues(tenant, broker).Inc()
}

// limitedCounter is the counter of calls of class c from tenant to broker
// refused by limit ("tenant" or "route"); nil for a nil m.
func (m *Metrics) limitedCounter(tenant, broker string, c callClass, limit string) prometheus.Counter {
	if m == nil {
		return nil
	}
	return m.protect.limited.WithLabelValues(tenant, broker, callClassNames[c], limit)
}

// shedCounter is the counter of calls of class c from tenant to broker
// the overload stage refused; nil for a nil m.
func (m *Metrics) shedCounter(tenant, broker string, c callClass) prometheus.Counter {
	if m == nil {
		return nil
	}
	return m.protect.shed.WithLabelValues(tenant, broker, callClassNames[c])
}
