package console

import (
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// usageSteps are at most this many points per plan on the usage chart.
const usageSteps = 96

type usageData struct {
	From, To, Tenant, Broker string
	Query                    string
	BrokerNames, TenantNames []string
	Report                   *proxy.UsageReport
	TotalHours               float64
	TotalBindings            int
	Names                    map[string]string // service and plan names by id, from the routes' catalogs
	Chart                    template.HTML
}

func (c *Console) usage(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	q := r.URL.Query()
	d := &usageData{From: q.Get("from"), To: q.Get("to"), Tenant: q.Get("tenant"), Broker: q.Get("broker"), Query: r.URL.RawQuery,
		Names: c.catalogNames(r.Context())}
	routes := v.Routes()
	d.BrokerNames = routeBrokers(routes)
	d.TenantNames = names(routes, func(x proxy.RouteInfo) string { return x.Tenant })
	uq, err := proxy.ParseUsageQuery(r.URL.Query())
	if err != nil {
		return d, actionError(err)
	}
	rep, err := v.Usage(r.Context(), uq)
	if err != nil {
		return d, actionError(err)
	}
	d.Report = &rep
	for _, row := range rep.Rows {
		d.TotalHours += row.InstanceHours
		d.TotalBindings += row.Bindings
	}
	uq.From, uq.To = rep.From, rep.To
	step := rep.To.Sub(rep.From) / usageSteps
	if step < time.Minute {
		step = time.Minute
	}
	points, err := v.LiveInstancesSeries(r.Context(), uq, step)
	if err != nil {
		return d, actionError(err)
	}
	by := map[string]*series{}
	var keys []string
	for _, p := range points {
		k := p.Broker + " " + nameOr(d.Names, p.Plan)
		s := by[k]
		if s == nil {
			s = &series{name: k}
			by[k] = s
			keys = append(keys, k)
		}
		s.points = append(s.points, point{at: p.At, v: float64(p.Live)})
	}
	slices.Sort(keys)
	var ss []series
	for _, k := range keys {
		ss = append(ss, *by[k])
	}
	d.Chart = lineChart("Live instances per plan", "instances", ss)
	return d, nil
}

// usageCSV serves the usage report of the form as a CSV download, with
// the service and plan names of the cached catalogs beside their ids.
func (c *Console) usageCSV(w http.ResponseWriter, r *http.Request) {
	if _, ok := c.session(w, r); !ok {
		return
	}
	uq, err := proxy.ParseUsageQuery(r.URL.Query())
	if err != nil {
		osb.WriteError(w, osb.AsError(err))
		return
	}
	rep, err := c.o.View.Usage(r.Context(), uq)
	if err != nil {
		osb.WriteError(w, osb.AsError(err))
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="usage-%s-%s.csv"`,
		rep.From.UTC().Format("20060102T150405Z"), rep.To.UTC().Format("20060102T150405Z")))
	w.Header().Set("Cache-Control", "no-store")
	if err := rep.WriteCSV(w, csvNames(c.catalogNames(r.Context()))); err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: writing the usage CSV failed", slog.String("error", err.Error()))
	}
}

// csvNames turns CatalogNames ("service" and "service/plan") into the
// CSV's names: a plan's own name without its service's.
func csvNames(names map[string]string) map[string]string {
	out := make(map[string]string, len(names))
	for id, n := range names {
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			n = n[i+1:]
		}
		out[id] = n
	}
	return out
}
