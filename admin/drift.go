package admin

import (
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// mountDrift adds the catalog drift routes (mountCatalogs mounts them
// with the other catalog routes):
//
//	GET  /admin/catalogs/drift             every broker's drift report (View.CatalogDrift): {"brokers":[DriftReport...]}
//	POST /admin/catalogs/{broker}/accept   accept the broker's latest catalog as its baseline (View.AcceptCatalog); answers the broker's report
//
// The admin log line of an accept (warn) names who accepted: the X-Operator
// header and the caller's address.
func (a *Admin) mountDrift() {
	a.handle("GET /admin/catalogs/drift", func(r *http.Request, v *proxy.View) (any, string, error) {
		reports, err := v.CatalogDrift(r.Context())
		if err != nil {
			return nil, "", &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
				Description: "the state store did not answer for the brokers' catalogs: the drift report is kept there"}
		}
		n := 0
		for _, d := range reports {
			n += len(d.Items)
		}
		return driftAnswer{Brokers: reports, Drift: n}, fmt.Sprintf("listed the drift of %d brokers: %d items", len(reports), n), nil
	})
	a.handle("POST /admin/catalogs/{broker}/accept", func(r *http.Request, v *proxy.View) (any, string, error) {
		name, who := r.PathValue("broker"), operator(r)
		if err := v.AcceptCatalog(r.Context(), name, who); err != nil {
			return nil, "", err
		}
		reports, err := v.CatalogDrift(r.Context())
		if err != nil {
			return nil, "", &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
				Description: fmt.Sprintf("the catalog of broker %q was accepted, but the state store did not answer for its report", name)}
		}
		for _, d := range reports {
			if d.Broker == name {
				return d, fmt.Sprintf("accepted catalog %s by %s", d.AcceptedHash, who), nil
			}
		}
		return nil, "", osb.Errorf(http.StatusNotFound, "", "no broker named %q in the configuration", name)
	})
}

// driftAnswer is the body of GET /admin/catalogs/drift.
type driftAnswer struct {
	// Brokers are the reports, in configuration order.
	Brokers []proxy.DriftReport `json:"brokers"`
	// Drift counts the items of all reports.
	Drift int `json:"drift"`
}
