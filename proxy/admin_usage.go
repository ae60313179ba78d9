package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// The usage admin routes: the report of Gateway.Usage and the series of
// Gateway.LiveInstancesSeries, as JSON. Times are RFC 3339.

// MountUsageAdmin adds the usage routes to a, behind the admin token (see
// control), logging each call to log (nil: slog.Default()):
//
//	GET /admin/usage?from=&to=&tenant=&broker=              the usage report (UsageReport)
//	GET /admin/usage/series?from=&to=&tenant=&broker=&step= live instances per plan at each step ({"points": [UsagePoint...]})
//
// from and to (RFC 3339) default to now and DefaultUsagePeriod before to;
// step (a Go duration) to DefaultUsageStep. A bad time, a from not before
// to, or a step making more than MaxUsagePoints points is a 400.
func (a *Admin) MountUsageAdmin(sw *Switch, log *slog.Logger) {
	a.bind(sw, log)
	a.handleControl("GET /admin/usage", usageReport)
	a.handleControl("GET /admin/usage/series", usageSeries)
}

// DefaultUsageStep is the step of /admin/usage/series without ?step=.
const DefaultUsageStep = time.Hour

// usageQuery reads ?from=, ?to=, ?tenant= and ?broker=.
func usageQuery(v url.Values) (UsageQuery, error) {
	q := UsageQuery{Tenant: v.Get("tenant"), Broker: v.Get("broker")}
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		s := v.Get(f.name)
		if s == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return q, osb.Errorf(http.StatusBadRequest, "", "%s must be a time in RFC 3339 (like 2024-05-01T00:00:00Z), got %q", f.name, s)
		}
		*f.to = t
	}
	return q, nil
}

func usageReport(r *http.Request, g *Gateway) (any, string, error) {
	q, err := usageQuery(r.URL.Query())
	if err != nil {
		return nil, "", err
	}
	rep, err := g.Usage(r.Context(), q)
	if err != nil {
		return nil, "", usageError(err)
	}
	return rep, fmt.Sprintf("usage report from %s to %s (tenant %q, broker %q): %d rows",
		rep.From.Format(time.RFC3339), rep.To.Format(time.RFC3339), q.Tenant, q.Broker, len(rep.Rows)), nil
}

func usageSeries(r *http.Request, g *Gateway) (any, string, error) {
	v := r.URL.Query()
	q, err := usageQuery(v)
	if err != nil {
		return nil, "", err
	}
	step := DefaultUsageStep
	if s := v.Get("step"); s != "" {
		if step, err = time.ParseDuration(s); err != nil {
			return nil, "", osb.Errorf(http.StatusBadRequest, "", "step must be a duration (like 1h or 15m), got %q", s)
		}
	}
	points, err := g.LiveInstancesSeries(r.Context(), q, step)
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
