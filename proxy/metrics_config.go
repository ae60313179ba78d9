package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// ConfigMetrics are the configuration's series: reloads by result, and
// the hash of the file in force (metrics.ConfigMetrics). A nil
// *ConfigMetrics records nothing. Safe for concurrent use; build one per
// process.
type ConfigMetrics = metrics.ConfigMetrics

// Reload results, the values of the result label.
const (
	ReloadSuccess = metrics.ReloadSuccess
	ReloadFailure = metrics.ReloadFailure
)

// NewConfigMetrics creates the series and registers them on reg; both
// results start at 0, so that a rate or an alert has a series before the
// first reload.
func NewConfigMetrics(reg prometheus.Registerer) (*ConfigMetrics, error) {
	return metrics.NewConfigMetrics(reg)
}
