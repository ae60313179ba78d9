package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sony/gobreaker/v2"
)

// brokerProtectMetrics are the instruments of the per-broker protections: the
// concurrency cap's queue and the circuit breaker. Tenant and broker
// labels come from the configuration.
type brokerProtectMetrics struct {
	queued      *prometheus.CounterVec   // tenant, broker
	timeouts    *prometheus.CounterVec   // tenant, broker
	wait        *prometheus.HistogramVec // tenant, broker
	refused     *prometheus.CounterVec   // tenant, broker
	state       *prometheus.GaugeVec     // broker
	transitions *prometheus.CounterVec   // broker, to
}

func newBrokerProtectMetrics() *brokerProtectMetrics {
	tb := []string{"tenant", "broker"}
	return &brokerProtectMetrics{
		queued: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_broker_queued_total",
			Help: "Calls that found their broker at max_in_flight and waited for a slot."}, tb),
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_broker_queue_timeouts_total",
			Help: "Calls refused because no slot of their broker freed within queue_timeout (at once with queue_timeout 0)."}, tb),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "osb_gateway_broker_queue_wait_seconds",
			Help: "Time calls that found their broker at max_in_flight waited for a slot, admitted or not.", Buckets: durationBuckets[:]}, tb),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_breaker_refusals_total",
			Help: "Calls answered by their broker's circuit breaker without reaching the broker."}, tb),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_breaker_state",
			Help: "State of the broker's circuit breaker: 0 closed, 1 half-open, 2 open."}, []string{"broker"}),
		transitions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_breaker_transitions_total",
			Help: "Transitions of the broker's circuit breaker, by the state entered."}, []string{"broker", "to"}),
	}
}

func (p *brokerProtectMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{p.queued, p.timeouts, p.wait, p.refused, p.state, p.transitions}
}

// BrokerProtectStart makes the series of a protected broker and the tenants
// routed to it show from the start, zero-valued: the queue's when it has a
// cap, the breaker's (in state st) when it has one.
func (m *Metrics) BrokerProtectStart(broker string, tenants []string, capped, breaker bool, st gobreaker.State) {
	if m == nil {
		return
	}
	p := m.brokerProtect
	for _, t := range tenants {
		if capped {
			p.queued.WithLabelValues(t, broker)
			p.timeouts.WithLabelValues(t, broker)
			p.wait.WithLabelValues(t, broker)
		}
		if breaker {
			p.refused.WithLabelValues(t, broker)
		}
	}
	if breaker {
		p.state.WithLabelValues(broker).Set(float64(st))
		for _, to := range BreakerStates {
			p.transitions.WithLabelValues(broker, to)
		}
	}
}

// QueueWaited counts a call that waited for a slot, for d; timedOut: it
// got none in time.
func (m *Metrics) QueueWaited(tenant, broker string, d time.Duration, timedOut bool) {
	if m == nil {
		return
	}
	m.brokerProtect.queued.WithLabelValues(tenant, broker).Inc()
	m.brokerProtect.wait.WithLabelValues(tenant, broker).Observe(d.Seconds())
	if timedOut {
		m.brokerProtect.timeouts.WithLabelValues(tenant, broker).Inc()
	}
}

// QueueRefused counts a call refused at once: the broker at its cap, and
// queue_timeout 0.
func (m *Metrics) QueueRefused(tenant, broker string) {
	if m == nil {
		return
	}
	m.brokerProtect.timeouts.WithLabelValues(tenant, broker).Inc()
}

// BreakerRefused counts a call the breaker answered.
func (m *Metrics) BreakerRefused(tenant, broker string) {
	if m == nil {
		return
	}
	m.brokerProtect.refused.WithLabelValues(tenant, broker).Inc()
}

// BreakerChanged records a transition of broker's breaker to the state to.
func (m *Metrics) BreakerChanged(broker string, to gobreaker.State) {
	if m == nil {
		return
	}
	m.brokerProtect.state.WithLabelValues(broker).Set(float64(to))
	m.brokerProtect.transitions.WithLabelValues(broker, BreakerStateName(to)).Inc()
}

// Breaker states as /admin/brokers and the metrics name them, indexed by
// gobreaker.State (closed 0, half-open 1, open 2: the value of
// osb_gateway_breaker_state).
var BreakerStates = [...]string{"closed", "half_open", "open"}

func BreakerStateName(st gobreaker.State) string {
	if int(st) >= 0 && int(st) < len(BreakerStates) {
		return BreakerStates[st]
	}
	return st.String()
}
