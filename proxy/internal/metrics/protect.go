package metrics

import (
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/prometheus/client_golang/prometheus"
)

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
			Help: "Platform calls refused because they named a service instance another tenant owns, by the calling tenant and broker (proxy/internal/owner/owner.go)."},
			[]string{"tenant", "broker"}),
	}
}

// OwnerRefused counts a call of tenant to broker refused because its
// instance is another tenant's; nothing for a nil m.
func (m *Metrics) OwnerRefused(tenant, broker string) {
	if m == nil {
		return
	}
	m.protect.owner.WithLabelValues(tenant, broker).Inc()
}

// LimitedCounter is the counter of calls of class c from tenant to broker
// refused by limit ("tenant" or "route"); nil for a nil m.
func (m *Metrics) LimitedCounter(tenant, broker string, c core.CallClass, limit string) prometheus.Counter {
	if m == nil {
		return nil
	}
	return m.protect.limited.WithLabelValues(tenant, broker, core.CallClassNames[c], limit)
}

// ShedCounter is the counter of calls of class c from tenant to broker
// the overload stage refused; nil for a nil m.
func (m *Metrics) ShedCounter(tenant, broker string, c core.CallClass) prometheus.Counter {
	if m == nil {
		return nil
	}
	return m.protect.shed.WithLabelValues(tenant, broker, core.CallClassNames[c])
}

// newQuotaGauge is osb_gateway_quota_used.
func newQuotaGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_quota_used",
		Help: "Service instances counted against each quota (recorded and in flight), by tenant and quota, as of the latest provision that counted them."},
		[]string{"tenant", "quota"})
}

// QuotaStart shows the quotas' series from the start, at 0 until a
// provision counts them: one per (tenant, quota label) pair.
func (m *Metrics) QuotaStart(series [][2]string) {
	if m == nil {
		return
	}
	for _, s := range series {
		m.quotaUsed.WithLabelValues(s[0], s[1])
	}
}

// QuotaSet records n instances counted against the quota label of tenant.
func (m *Metrics) QuotaSet(tenant, label string, n int) {
	if m == nil {
		return
	}
	m.quotaUsed.WithLabelValues(tenant, label).Set(float64(n))
}

// newPolicyMetric is osb_gateway_policy_denials_total.
func newPolicyMetric() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_policy_denials_total",
		Help: "Platform calls a policy denied (mode enforce) or would have denied (mode report), by tenant, broker, policy and mode."},
		[]string{"tenant", "broker", "policy", "mode"})
}

// PolicyDenied counts a denial; nothing for a nil m.
func (m *Metrics) PolicyDenied(tenant, broker, pol, mode string) {
	if m == nil {
		return
	}
	m.policies.WithLabelValues(tenant, broker, pol, mode).Inc()
}
