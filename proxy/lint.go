package proxy

import (
	"context"
	"errors"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// CatalogLint is what fetching and linting one broker's catalog found.
type CatalogLint struct {
	Broker  string
	Version string
	Err     error // the catalog could not be fetched or decoded
	// Refused reports that Err is the broker's refusal of Version (its 412
	// to the catalog at it): the broker answered.
	Refused  bool
	Findings []rules.Finding
}

// LintCatalogs fetches every broker's catalog through its configured
// credentials and TLS, at rules.CloudControllerVersion capped at the broker's maximum, and
// lints it (rules.NewIndex). osb-gateway check prints the result.
func (g *Gateway) LintCatalogs(ctx context.Context) []CatalogLint {
	out := make([]CatalogLint, 0, len(g.cfg.Brokers))
	for _, b := range g.cfg.Brokers {
		u := g.upstreams[b.Name]
		cl := CatalogLint{Broker: b.Name, Version: u.WarmVersion().String()}
		e, err := g.catalogs.load(ctx, catalogFetch{up: u, key: catalogKey{broker: u.Name, version: cl.Version}, reqID: core.NewRequestID(), force: true}, nil)
		var refusal *versionRefusal
		if err != nil {
			cl.Err, cl.Refused = err, errors.As(err, &refusal)
		} else {
			cl.Findings = e.index.Findings()
		}
		out = append(out, cl)
	}
	return out
}
