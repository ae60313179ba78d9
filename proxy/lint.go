package proxy

import (
	"context"
	"errors"

	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
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
		e, err := g.catalogs.Load(ctx, catalog.Fetch{Up: u, Key: catalog.Key{Broker: u.Name, Version: cl.Version}, ReqID: core.NewRequestID(), Force: true}, nil)
		var refusal *catalog.VersionRefusal
		if err != nil {
			cl.Err, cl.Refused = err, errors.As(err, &refusal)
		} else {
			cl.Findings = e.Rules.Findings()
		}
		out = append(out, cl)
	}
	return out
}
