package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/rules"
)

// newDriftGauge is osb_gateway_catalog_drift: the current drift items of
// each broker's catalog, by kind (proxy/internal/catalog/catalog_drift.go).
func newDriftGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_catalog_drift",
		Help: "Changes between a broker's accepted catalog and its latest that strand live instances, by broker and kind " +
			"(guid_changed, service_removed, plan_removed, made_unbindable, made_non_updatable, schema_incompatible), as of the latest fetch."},
		[]string{"broker", "kind"})
}

// StartDrift shows every configured broker's drift series, at 0 until a
// fetch says otherwise.
func (m *Metrics) StartDrift(cfg *config.Config) {
	if m == nil {
		return
	}
	for _, b := range cfg.Brokers {
		for _, k := range rules.DriftKinds {
			m.drift.WithLabelValues(b.Name, k)
		}
	}
}

// SetDrift sets the broker's drift series to the counts of kinds, one
// entry per drift item.
func (m *Metrics) SetDrift(broker string, kinds []string) {
	if m == nil {
		return
	}
	n := make(map[string]int, len(rules.DriftKinds))
	for _, k := range kinds {
		n[k]++
	}
	for _, k := range rules.DriftKinds {
		m.drift.WithLabelValues(broker, k).Set(float64(n[k]))
	}
}
