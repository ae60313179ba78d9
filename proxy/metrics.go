package proxy

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// Metrics are the gateway's Prometheus instruments (metrics.Metrics): calls
// by tenant, broker, endpoint and status, broker calls, the protections,
// the guard's store errors and what scrapes read. A nil *Metrics records
// nothing. Build one per process (NewMetrics) and pass it to every Gateway.
type Metrics = metrics.Metrics

// NewMetrics registers the gateway's instruments with reg (metrics.NewMetrics).
var NewMetrics = metrics.NewMetrics

// What the scrapes read (metrics.CertExpiry and the others): see
// Metrics.ObserveCertificates, ObserveInstances, ObserveState,
// ObserveExpiring and ObserveCatalogs.
type (
	CertExpiry     = metrics.CertExpiry
	InstanceCount  = metrics.InstanceCount
	InstanceCounts = metrics.InstanceCounts
	StateCount     = metrics.StateCount
	StateCounts    = metrics.StateCounts
	ExpiringCounts = metrics.ExpiringCounts
	CatalogCounts  = metrics.CatalogCounts
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
