package metrics

import (
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Series present from the start. Prometheus shows a labelled family only
// once it has a series, and a rate() or an alert over a series that appears
// with its first event misses that event; so every series whose labels the
// configuration determines is made, zero-valued, when a Gateway is built
// (and on every reload, for the tenants and brokers it adds). The
// exceptions are the request series (osb_gateway_requests_total and
// osb_gateway_request_duration_seconds, labelled by the status code the
// call ends with) and osb_gateway_findings_total (labelled by the rule
// broken): they appear with their first call or finding.

// storeOps are the op label values of osb_gateway_store_errors_total.
var storeOps = [...]string{"acquire", "update", "release", "orphan", "inventory", "rate_limit", "observe", "expiring"}

// orphanDecisions are the decision values of
// osb_gateway_orphan_candidates_total (Scope.Orphan).
var orphanDecisions = [...]string{"reported", "queued", "cancelled"}

// catalogDecisions are the decision values of
// osb_gateway_catalog_unavailable_total.
var catalogDecisions = [...]string{core.CatalogRefused, core.CatalogForwarded}

// Start makes the zero-valued series of cfg's tenants and brokers.
func (m *Metrics) Start(cfg *config.Config) {
	if m == nil {
		return
	}
	for _, op := range storeOps {
		m.state.errs.WithLabelValues(op)
	}
	for _, b := range cfg.Brokers {
		for _, d := range orphanDecisions {
			m.orphans.WithLabelValues(b.Name, d)
		}
		for _, d := range catalogDecisions {
			m.noCatalog.WithLabelValues(b.Name, d)
		}
		for _, a := range shieldAnswers {
			m.polls.WithLabelValues(b.Name, a)
		}
		for _, r := range mitigationResults {
			m.health.mitigations.WithLabelValues(b.Name, r.label)
		}
	}
	for _, t := range cfg.Tenants {
		for _, r := range t.Routes {
			for ep := rules.Endpoint(0); int(ep) < numEndpoints; ep++ {
				if ep.Mutating() {
					m.blocked.WithLabelValues(t.Name, r.Broker, ep.String())
				}
			}
		}
	}
}
