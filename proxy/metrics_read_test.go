package proxy

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// metricsRegs maps the Metrics that registeredMetrics built to their
// registries, so that tests read a series by name and labels.
var metricsRegs sync.Map // *Metrics → *prometheus.Registry

// registeredMetrics is NewMetrics on a registry of its own, which
// seriesValue and seriesCount read.
func registeredMetrics(now func() time.Time) (*Metrics, error) {
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg, now)
	if err == nil {
		metricsRegs.Store(m, reg)
	}
	return m, err
}

// seriesValue is the value of the series of family name with labels in
// m's registry (m built by registeredMetrics): a counter's or a gauge's;
// -1 when there is no such series.
func seriesValue(m *Metrics, name string, labels map[string]string) float64 {
	found := series(m, name, labels)
	if len(found) == 0 {
		return -1
	}
	if c := found[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return found[0].GetGauge().GetValue()
}

// seriesCount is the number of series of family name in m's registry.
func seriesCount(m *Metrics, name string) int { return len(series(m, name, nil)) }

func series(m *Metrics, name string, labels map[string]string) []*dto.Metric {
	reg, ok := metricsRegs.Load(m)
	if !ok {
		panic("seriesValue: the Metrics were not built by registeredMetrics")
	}
	out, err := matching(reg.(*prometheus.Registry), name, labels)
	if err != nil {
		panic(err)
	}
	return out
}

// matching returns the series of family name in g whose labels include
// want.
func matching(g prometheus.Gatherer, name string, want map[string]string) ([]*dto.Metric, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}
