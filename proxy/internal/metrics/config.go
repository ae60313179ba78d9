package metrics

import (
	"errors"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// ConfigMetrics are the configuration's series: reloads by result, and
// the hash of the file in force. A nil *ConfigMetrics records nothing.
// Safe for concurrent use; build one per process.
type ConfigMetrics struct {
	reloads *prometheus.CounterVec
	info    *prometheus.GaugeVec
	mu      sync.Mutex
	hash    string // the info series' label; "" before the first SetHash
}

// Reload results, the values of the result label.
const (
	ReloadSuccess = "success"
	ReloadFailure = "failure"
)

// NewConfigMetrics creates the series and registers them on reg; both
// results start at 0, so that a rate or an alert has a series before the
// first reload.
func NewConfigMetrics(reg prometheus.Registerer) (*ConfigMetrics, error) {
	m := &ConfigMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_config_reload_total",
			Help: `Configuration reloads (SIGHUP, file watch, POST /admin/reload) by result: "success" (swapped in) or "failure" (refused; the running configuration stays).`},
			[]string{"result"}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_config_info",
			Help: "1, labelled with the start of the SHA-256 of the configuration file in force."}, []string{"hash"}),
	}
	m.reloads.WithLabelValues(ReloadSuccess)
	m.reloads.WithLabelValues(ReloadFailure)
	if reg == nil {
		return m, nil
	}
	return m, errors.Join(reg.Register(m.reloads), reg.Register(m.info))
}

// Reloaded counts one reload with its result.
func (m *ConfigMetrics) Reloaded(ok bool) {
	if m == nil {
		return
	}
	r := ReloadFailure
	if ok {
		r = ReloadSuccess
	}
	m.reloads.WithLabelValues(r).Inc()
}

// SetHash makes hash the label of the info series, dropping the previous
// one.
func (m *ConfigMetrics) SetHash(hash string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hash != "" && m.hash != hash {
		m.info.DeleteLabelValues(m.hash)
	}
	m.hash = hash
	m.info.WithLabelValues(hash).Set(1)
}
