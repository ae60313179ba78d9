package proxy

import "github.com/osb-gateway/osb-gateway/proxy/internal/proxytest"

// The series of a Metrics built on a registry of its own (proxytest).
var (
	registeredMetrics = proxytest.RegisteredMetrics
	seriesValue       = proxytest.SeriesValue
	seriesCount       = proxytest.SeriesCount
	matching          = proxytest.Matching
)
