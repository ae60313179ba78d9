package console

import (
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// refusalWindow is how far back the overview counts refusals (its
// heading says so in words).
const refusalWindow = 15 * time.Minute

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
	if ops, err := v.Operations(r.Context(), "", ""); err != nil {
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
	d.StateError = strings.Join(errs, "; ")
	if g := c.o.Gatherer; g != nil {
		c.fromMetrics(g, now, d)
	}
	samples := c.hist.all()
	d.Sampled = len(samples) > 0
	d.Refusals = recentRefusals(samples, now)
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

// fromMetrics fills the reloads and certificates from the registry.
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
					Expires: fmtTime(exp), In: age(exp.Sub(now)), Soon: exp.Sub(now) < 14*24*time.Hour})
				if soonest.IsZero() || exp.Before(soonest) {
					soonest = exp
				}
			}
		}
	}
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

type operationRow struct {
	proxy.Operation
	Age, DeadlineIn string
}

type orphanRow struct {
	proxy.OrphanInfo
	NextAttempt string
}

type operationsData struct {
	Broker, Tenant, Kind, Older string
	Filtered                    bool
	BrokerNames, TenantNames    []string
	Kinds, Ages                 []string
	Ops                         []operationRow
	Orphans                     []orphanRow
	AgeChart                    template.HTML
}

// ageBuckets are the lock-age filters and the bars of the age chart.
var ageBuckets = []struct {
	name string
	min  time.Duration
}{{"1m", time.Minute}, {"5m", 5 * time.Minute}, {"30m", 30 * time.Minute}, {"2h", 2 * time.Hour}, {"24h", 24 * time.Hour}}

func (c *Console) operations(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	q := r.URL.Query()
	now := v.Now()
	d := &operationsData{Broker: q.Get("broker"), Tenant: q.Get("tenant"), Kind: q.Get("kind"), Older: q.Get("older"),
		Kinds: []string{store.KindProvision, store.KindUpdate, store.KindDeprovision, store.KindBind, store.KindUnbind}}
	d.Filtered = d.Broker != "" || d.Tenant != "" || d.Kind != "" || d.Older != ""
	routes := v.Routes()
	d.BrokerNames = routeBrokers(routes)
	d.TenantNames = names(routes, func(x proxy.RouteInfo) string { return x.Tenant })
	var older time.Duration
	for _, b := range ageBuckets {
		d.Ages = append(d.Ages, b.name)
		if b.name == d.Older {
			older = b.min
		}
	}
	ops, err := v.Operations(r.Context(), d.Broker, d.Tenant)
	if err != nil {
		return d, stateError("reading the operations", err)
	}
	counts := make([]float64, len(ageBuckets)+1)
	for _, o := range ops {
		a := now.Sub(o.Started)
		i := 0
		for i < len(ageBuckets) && a >= ageBuckets[i].min {
			i++
		}
		counts[i]++
		if (d.Kind != "" && o.Kind != d.Kind) || a < older {
			continue
		}
		d.Ops = append(d.Ops, operationRow{Operation: o, Age: age(a), DeadlineIn: age(o.Deadline.Sub(now))})
	}
	bars := []bar{{"under 1m", counts[0]}}
	for i, b := range ageBuckets {
		label := b.name + " or more"
		if i+1 < len(ageBuckets) {
			label = b.name + " to " + ageBuckets[i+1].name
		}
		bars = append(bars, bar{label, counts[i+1]})
	}
	d.AgeChart = barChart("Operations by age", bars)
	os, err := v.Orphans(r.Context())
	if err != nil {
		return d, stateError("reading the orphans", err)
	}
	for _, o := range os {
		row := orphanRow{OrphanInfo: o}
		if o.Queued {
			row.NextAttempt = fmtTime(o.NextAttempt)
		}
		d.Orphans = append(d.Orphans, row)
	}
	return d, nil
}

// release force-releases a lock from the operations page.
func (c *Console) release(r *http.Request, who string) (string, string, error) {
	broker, instance, binding, reason := r.PostForm.Get("broker"), r.PostForm.Get("instance"), r.PostForm.Get("binding"), r.PostForm.Get("reason")
	back := "/ui/operations"
	if strings.TrimSpace(reason) == "" {
		return back, "", errors.New("a release needs a reason: it is logged with your name")
	}
	o, err := c.o.View.Release(r.Context(), broker, instance, binding, who, reason)
	if err != nil {
		return back, "", actionError(err)
	}
	what := "instance " + instance
	if binding != "" {
		what = "binding " + binding + " of instance " + instance
	}
	return back, fmt.Sprintf("Released the %s lock on %s of broker %s.", o.Kind, what, broker), nil
}

// reconcile polls the broker for an operation's state, or forces one,
// from the operations page.
func (c *Console) reconcile(r *http.Request, who string) (string, string, error) {
	f := r.PostForm
	req := proxy.ReconcileRequest{Broker: f.Get("broker"), InstanceID: f.Get("instance"), BindingID: f.Get("binding"), Who: who}
	if f.Get("action") == "force" {
		req.State, req.Description = f.Get("state"), strings.TrimSpace(f.Get("description"))
	}
	res, err := c.o.View.Reconcile(r.Context(), req)
	if err != nil {
		return "/ui/operations", "", actionError(err)
	}
	what := "instance " + req.InstanceID
	if req.BindingID != "" {
		what = "binding " + req.BindingID + " of instance " + req.InstanceID
	}
	msg := fmt.Sprintf("Reconciled %s of broker %s: %s", what, req.Broker, res.Outcome)
	if res.Answer != "" {
		msg += " (" + res.Answer + ")"
	}
	if res.Released {
		msg += "; the lock is released"
	}
	return "/ui/operations", msg + ".", nil
}

// actionError is what an action's page says of err: an OSB error's
// description (it names what was expected), else a generic line.
func actionError(err error) error {
	var e *osb.Error
	if errors.As(err, &e) && e.Description != "" {
		return errors.New(e.Description)
	}
	return stateError("the action", err)
}

type instancesData struct {
	Q                        proxy.InstanceQuery
	BrokerNames, TenantNames []string
	Found                    []proxy.InstanceInfo
	Scanned                  int
	Truncated                bool
}

func (c *Console) instances(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	q := r.URL.Query()
	d := &instancesData{Q: proxy.InstanceQuery{Tenant: q.Get("tenant"), Broker: q.Get("broker"), Service: strings.TrimSpace(q.Get("service")),
		Plan: strings.TrimSpace(q.Get("plan")), ID: strings.TrimSpace(q.Get("id"))}}
	routes := v.Routes()
	d.BrokerNames = routeBrokers(routes)
	d.TenantNames = names(routes, func(x proxy.RouteInfo) string { return x.Tenant })
	found, scanned, truncated, err := v.Instances(r.Context(), d.Q)
	d.Found, d.Scanned, d.Truncated = found, scanned, truncated
	if err != nil {
		return d, stateError("searching the inventory", err)
	}
	return d, nil
}

type driftData struct {
	Reports []proxy.DriftReport
}

func (c *Console) drift(r *http.Request, f *frame) (any, error) {
	reports, err := c.o.View.CatalogDrift(r.Context())
	if err != nil {
		return &driftData{}, actionError(err)
	}
	return &driftData{Reports: reports}, nil
}

// accept makes a broker's latest catalog the accepted one.
func (c *Console) accept(r *http.Request, who string) (string, string, error) {
	broker := r.PostForm.Get("broker")
	if err := c.o.View.AcceptCatalog(r.Context(), broker, who); err != nil {
		return "/ui/drift", "", actionError(err)
	}
	return "/ui/drift", fmt.Sprintf("Accepted the latest catalog of broker %s: the platforms get it now.", broker), nil
}

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
		Names: v.CatalogNames()}
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

// usageCSV serves the usage report of the form as a CSV download.
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
	if err := rep.WriteCSV(w); err != nil {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: writing the usage CSV failed", slog.String("error", err.Error()))
	}
}

func nameOr(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}
