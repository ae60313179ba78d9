package proxy

import (
	"context"
	"errors"
	"fmt"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// RefusedVersion is an API version a broker refuses, as it answered GET
// /v2/catalog at that version (rules.RefusesVersion).
type RefusedVersion struct {
	Version osb.Version
	// Answer is the refusal's status and error code, "412
	// IncompatibleAPIVersion", or "412" when its body has no code.
	Answer string
	// Description is the broker's description, "" for none.
	Description string
}

// ProbeVersions asks the named broker for its catalog at every version of
// its api_version range, oldest first, and returns those it refuses. The
// catalog cache is left as it was. err is the first fetch that failed for
// another reason (the broker unreachable, a 5xx, an invalid catalog): the
// versions after it are not probed. osb-gateway check prints the result.
func (g *Gateway) ProbeVersions(ctx context.Context, broker string) ([]RefusedVersion, error) {
	u := g.upstreams[broker]
	if u == nil {
		return nil, fmt.Errorf("no broker is named %q", broker)
	}
	var out []RefusedVersion
	for v := u.Min; !u.Max.Less(v); v.Minor++ {
		f := catalog.Fetch{Up: u, Key: catalog.Key{Broker: u.Name, Version: v.String()}, ReqID: core.NewRequestID()}
		_, err := g.catalogs.FetchEntry(ctx, f, nil)
		var refusal *catalog.VersionRefusal
		switch {
		case errors.As(err, &refusal):
			out = append(out, RefusedVersion{Version: v, Answer: refusal.Answer(), Description: refusal.Description})
		case err != nil:
			return out, fmt.Errorf("at X-Broker-API-Version %s: %w", v, err)
		}
	}
	return out, nil
}
