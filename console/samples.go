package console

import (
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The console's memory of the gateway's counters: every SampleEvery it
// reads the metrics registry (the same series GET /metrics serves, so no
// counter is kept twice and nothing is added to the request path) and
// keeps the last Keep samples, from which the pages draw rates over time
// and count the recent refusals.

// refusalKinds are the refusals the gateway counts, by the metric that
// counts them (each has a broker label).
var refusalKinds = []struct{ kind, metric, label, value string }{
	{"operation in progress", "osb_gateway_blocked_total", "", ""},
	{"rate limited", "osb_gateway_rate_limited_total", "", ""},
	{"shed (overload)", "osb_gateway_shed_total", "", ""},
	{"circuit breaker open", "osb_gateway_breaker_refusals_total", "", ""},
	{"catalog unavailable", "osb_gateway_catalog_unavailable_total", "decision", "refused"},
	// A request that breaks the OSB rules (an unknown or removed plan, a
	// bad field) is refused with 400 under validation.requests: enforce,
	// the default; under report it is counted and forwarded.
	{"validation (request broke the OSB rules)", "osb_gateway_findings_total", "direction", "request"},
}

// sample is the counters at one time.
type sample struct {
	at time.Time
	// requests, errors4xx and errors5xx are osb_gateway_requests_total
	// by broker: all, 4xx answers, 5xx answers.
	requests, errors4xx, errors5xx map[string]float64
	// refusals are the refusal counters by kind, then broker.
	refusals map[string]map[string]float64
	// instances are the live instances by "broker/plan"
	// (osb_gateway_instances); nil when the gauge is not there.
	instances map[string]float64
}

// history is a ring of samples.
type history struct {
	mu      sync.Mutex
	keep    int
	samples []sample // oldest first
}

func (h *history) add(s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.samples = append(h.samples, s)
	if over := len(h.samples) - h.keep; over > 0 {
		h.samples = append(h.samples[:0:0], h.samples[over:]...)
	}
}

func (h *history) all() []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]sample(nil), h.samples...)
}

// gather reads one sample from g at now.
func gather(g prometheus.Gatherer, now time.Time) (sample, error) {
	s := sample{at: now, requests: map[string]float64{}, errors4xx: map[string]float64{}, errors5xx: map[string]float64{},
		refusals: map[string]map[string]float64{}}
	mfs, err := g.Gather()
	if err != nil && len(mfs) == 0 {
		return s, err
	}
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	if mf := byName["osb_gateway_requests_total"]; mf != nil {
		for _, m := range mf.GetMetric() {
			b, code := label(m, "broker"), label(m, "code")
			v := m.GetCounter().GetValue()
			s.requests[b] += v
			switch {
			case strings.HasPrefix(code, "4"):
				s.errors4xx[b] += v
			case strings.HasPrefix(code, "5"):
				s.errors5xx[b] += v
			}
		}
	}
	for _, k := range refusalKinds {
		by := map[string]float64{}
		if mf := byName[k.metric]; mf != nil {
			for _, m := range mf.GetMetric() {
				if k.label != "" && label(m, k.label) != k.value {
					continue
				}
				by[label(m, "broker")] += m.GetCounter().GetValue()
			}
		}
		s.refusals[k.kind] = by
	}
	if mf := byName["osb_gateway_instances"]; mf != nil {
		s.instances = map[string]float64{}
		for _, m := range mf.GetMetric() {
			s.instances[label(m, "broker")+"/"+label(m, "plan")] += m.GetGauge().GetValue()
		}
	}
	return s, nil
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// increase is how much a counter map grew from a to b, per key; a counter
// that went down (a restart of its process) counts from zero.
func increase(a, b map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range b {
		d := v - a[k]
		if d < 0 {
			d = v
		}
		out[k] = d
	}
	return out
}
