package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// The usage admin routes: the report of View.Usage and the series of
// View.LiveInstancesSeries, as JSON. Times are RFC 3339.

// mountUsage adds the usage routes, behind the admin token (see control):
//
//	GET /admin/usage?from=&to=&tenant=&broker=              the usage report (UsageReport)
//	GET /admin/usage/series?from=&to=&tenant=&broker=&step= live instances per plan at each step ({"points": [UsagePoint...]})
//
// from and to (RFC 3339) default to now and proxy.DefaultUsagePeriod
// before to; step (a Go duration) to DefaultUsageStep. A bad time, a from
// not before to, or a step making more than proxy.MaxUsagePoints points is
// a 400.
func (a *Admin) mountUsage() {
	a.handle("GET /admin/usage", usageReport)
	a.handle("GET /admin/usage/series", usageSeries)
}

// DefaultUsageStep is the step of /admin/usage/series without ?step=.
const DefaultUsageStep = time.Hour

func usageReport(r *http.Request, v *proxy.View) (any, string, error) {
	q, err := proxy.ParseUsageQuery(r.URL.Query())
	if err != nil {
		return nil, "", err
	}
	rep, err := v.Usage(r.Context(), q)
	if err != nil {
		return nil, "", usageError(err)
	}
	return rep, fmt.Sprintf("usage report from %s to %s (tenant %q, broker %q): %d rows",
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), q.Tenant, q.Broker, len(rep.Rows)), nil
}

func usageSeries(r *http.Request, v *proxy.View) (any, string, error) {
	qv := r.URL.Query()
	q, err := proxy.ParseUsageQuery(qv)
	if err != nil {
		return nil, "", err
	}
	step := DefaultUsageStep
	if s := qv.Get("step"); s != "" {
		if step, err = time.ParseDuration(s); err != nil {
			return nil, "", osb.Errorf(http.StatusBadRequest, "", "step must be a duration (like 1h or 15m), got %q", s)
		}
	}
	points, err := v.LiveInstancesSeries(r.Context(), q, step)
	if err != nil {
		return nil, "", usageError(err)
	}
	return map[string]any{"points": points}, fmt.Sprintf("live instances series (tenant %q, broker %q, step %s): %d points",
		q.Tenant, q.Broker, step, len(points)), nil
}

// usageError is the answer to an error of Usage or LiveInstancesSeries:
// an *osb.Error as it is, else storeError.
func usageError(err error) error {
	if e := (*osb.Error)(nil); errors.As(err, &e) {
		return e
	}
	return storeError("reading the inventory and usage records", err)
}
