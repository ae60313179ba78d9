package console

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/proxy"
)

// refusalWindow is how far back the overview counts refusals (its
// heading says so in words).
const refusalWindow = 15 * time.Minute

// certWarning is how soon a certificate's expiry needs an operator.
const certWarning = 14 * 24 * time.Hour

type brokerRow struct {
	proxy.BrokerInfo
	CatalogAge       string
	InFlight, Queued string
}

type refusalRow struct {
	Kind, Broker string
	Count        int64
}

type certRow struct {
	Use, Broker, Subject, Expires, In string
	Soon                              bool
}

type overviewData struct {
	Attention                      []attention
	Routes                         []proxy.RouteInfo
	Tenants                        int
	Brokers                        []brokerRow
	BrokersUp                      int
	Locks                          int
	OldestLock                     string
	OrphansQueued, OrphansReported int
	Reloads, ReloadFailures        int64
	CertSoonest                    string
	Certs                          []certRow
	NextCredential                 []string // brokers whose next_password is in use
	Refusals                       []refusalRow
	Window                         string
	Sampled                        bool
	StateError                     string
	RequestChart, RefusalChart     template.HTML
}

func (c *Console) overview(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	now := v.Now()
	d := &overviewData{Routes: v.Routes(), Window: "15 minutes"}
	d.Tenants = len(names(d.Routes, func(x proxy.RouteInfo) string { return x.Tenant }))
	for _, b := range v.Brokers() {
		row := brokerRow{BrokerInfo: b, CatalogAge: "never fetched", InFlight: "–", Queued: "–"}
		if !b.CatalogFetched.IsZero() {
			row.CatalogAge = age(now.Sub(b.CatalogFetched))
		}
		if b.InFlight >= 0 {
			row.InFlight, row.Queued = fmt.Sprint(b.InFlight), fmt.Sprint(b.Queued)
		}
		if b.Up() {
			d.BrokersUp++
		}
		d.Brokers = append(d.Brokers, row)
	}
	var errs []string
	ops, err := v.Operations(r.Context(), "", "")
	if err != nil {
		errs = append(errs, stateError("reading the operations", err).Error())
	} else if d.Locks = len(ops); len(ops) > 0 {
		d.OldestLock = age(now.Sub(ops[0].Started))
	}
	if os, err := v.Orphans(r.Context()); err != nil {
		errs = append(errs, stateError("reading the orphans", err).Error())
	} else {
		for _, o := range os {
			if o.Queued {
				d.OrphansQueued++
			} else {
				d.OrphansReported++
			}
		}
	}
	drift, err := v.CatalogDrift(r.Context())
	if err != nil {
		errs = append(errs, actionError(err).Error())
	}
	d.StateError = strings.Join(errs, "; ")
	if g := c.o.Gatherer; g != nil {
		c.fromMetrics(g, now, d)
	}
	samples := c.hist.all()
	d.Sampled = len(samples) > 0
	d.Refusals = recentRefusals(samples, now)
	d.Attention = c.attention(d, ops, drift, c.catalogNames(r.Context()), now)
	d.RequestChart = lineChart("Requests per second, by broker", "requests/s", rates(samples, func(s sample) map[string]float64 { return s.requests }))
	d.RefusalChart = lineChart("Refusals and 5xx per second, by broker", "answers/s", rates(samples, func(s sample) map[string]float64 {
		out := map[string]float64{}
		for b, v := range s.errors5xx {
			out[b+" 5xx"] += v
		}
		for _, by := range s.refusals {
			for b, v := range by {
				out[b+" refused"] += v
			}
		}
		return out
	}))
	return d, nil
}

// fromMetrics fills the reloads, certificates and credentials in use from
// the registry.
func (c *Console) fromMetrics(g prometheus.Gatherer, now time.Time, d *overviewData) {
	mfs, _ := g.Gather()
	var soonest time.Time
	for _, mf := range mfs {
		switch mf.GetName() {
		case "osb_gateway_config_reload_total":
			for _, m := range mf.GetMetric() {
				n := int64(m.GetCounter().GetValue())
				d.Reloads += n
				if label(m, "result") == proxy.ReloadFailure {
					d.ReloadFailures += n
				}
			}
		case "osb_gateway_certificate_expiry_seconds":
			for _, m := range mf.GetMetric() {
				exp := time.Unix(int64(m.GetGauge().GetValue()), 0)
				d.Certs = append(d.Certs, certRow{Use: label(m, "use"), Broker: label(m, "broker"), Subject: label(m, "subject"),
					Expires: fmtTime(exp), In: age(exp.Sub(now)), Soon: exp.Sub(now) < certWarning})
				if soonest.IsZero() || exp.Before(soonest) {
					soonest = exp
				}
			}
		case "osb_gateway_broker_credential":
			for _, m := range mf.GetMetric() {
				if label(m, "which") == "next" && m.GetGauge().GetValue() == 1 {
					d.NextCredential = append(d.NextCredential, label(m, "broker"))
				}
			}
		}
	}
	slices.Sort(d.NextCredential)
	if !soonest.IsZero() {
		d.CertSoonest = age(soonest.Sub(now))
	}
}

// recentRefusals counts each kind's refusals by broker over the samples of
// the last refusalWindow (from the oldest sample in it to the newest).
func recentRefusals(samples []sample, now time.Time) []refusalRow {
	if len(samples) < 2 {
		return nil
	}
	last := samples[len(samples)-1]
	first := samples[0]
	for _, s := range samples {
		if !s.at.Before(now.Add(-refusalWindow)) {
			first = s
			break
		}
	}
	var out []refusalRow
	for _, k := range refusalKinds {
		for b, n := range increase(first.refusals[k.kind], last.refusals[k.kind]) {
			if n > 0 {
				out = append(out, refusalRow{Kind: k.kind, Broker: b, Count: int64(n)})
			}
		}
	}
	for b, n := range increase(first.errors5xx, last.errors5xx) {
		if n > 0 {
			out = append(out, refusalRow{Kind: "5xx answered", Broker: b, Count: int64(n)})
		}
	}
	slices.SortFunc(out, func(a, b refusalRow) int {
		if a.Count != b.Count {
			return int(b.Count - a.Count)
		}
		return strings.Compare(a.Kind+a.Broker, b.Kind+b.Broker)
	})
	return out
}

// rates turns counters into per-second rates between samples, one series
// per key.
func rates(samples []sample, of func(sample) map[string]float64) []series {
	by := map[string]*series{}
	var keys []string
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1], samples[i]
		dt := b.at.Sub(a.at).Seconds()
		if dt <= 0 {
			continue
		}
		for k, d := range increase(of(a), of(b)) {
			s := by[k]
			if s == nil {
				s = &series{name: k}
				by[k] = s
				keys = append(keys, k)
			}
			s.points = append(s.points, point{at: b.at, v: d / dt})
		}
	}
	slices.Sort(keys)
	out := make([]series, 0, len(keys))
	for _, k := range keys {
		out = append(out, *by[k])
	}
	return out
}
