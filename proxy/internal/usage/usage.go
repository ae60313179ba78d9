// Package usage reports the instance-hours and bindings of the inventory
// and the store's usage records: a service over internal/store, read by the
// operator's surface, never on the request path.
package usage

import (
	"cmp"
	"context"
	"encoding/csv"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// Usage: instance-hours and bindings per tenant, broker, service and plan
// over a period, from the inventory (the live instances and bindings, with
// their Created) and the store's usage records (what was deleted, and the
// plans an instance left; see store.UsageStore). An instance's hours on a
// plan are the part of its intervals on that plan inside the period: from
// its Created, or the plan change that put it on the plan, to its
// deletion, or the plan change that took it off, or on. Counted exactly to
// the microsecond the store keeps. A provision (or bind) that failed, or
// whose outcome is unknown (its lock released by an operator), is not
// counted until a reconcile records it succeeded.
//
// Cost: a report reads every live instance and binding (an export of the
// inventory, a page at a time) and the usage records that ended after the
// period's start; it holds in memory only the instances that have such
// records and one row per tenant, broker, service and plan. A million
// instances take seconds: a report is an operator's read, never on the
// request path.

// DefaultUsagePeriod is the period of a UsageQuery without From: the 30
// days before To.
const DefaultUsagePeriod = 30 * 24 * time.Hour

// MaxUsagePoints is the most points LiveInstancesSeries computes per plan.
const MaxUsagePoints = 10000

// UsageQuery selects a usage report: the period [From, To) and, optionally,
// one tenant and one broker.
type UsageQuery struct {
	// From and To bound the period, From included, To not. Zero To is the
	// gateway's now; zero From is DefaultUsagePeriod before To. From must
	// be before To.
	From, To time.Time
	// Tenant and Broker keep the usage of one tenant, one broker; empty:
	// all.
	Tenant, Broker string
}

// UsageRow is the usage of one plan of one tenant's broker over a period.
type UsageRow struct {
	// Tenant, Broker, Service and Plan name the row (Service and Plan are
	// the catalog's service and plan ids).
	Tenant  string `json:"tenant"`
	Broker  string `json:"broker"`
	Service string `json:"service_id"`
	Plan    string `json:"plan_id"`
	// InstanceHours is the sum of the hours each instance spent on the
	// plan within the period.
	InstanceHours float64 `json:"instance_hours"`
	// Instances counts the distinct instances on the plan at some time in
	// the period.
	Instances int `json:"instances"`
	// Bindings counts the bindings created in the period (by the bind's
	// service and plan).
	Bindings int `json:"bindings"`
	// LiveAtEnd counts the instances on the plan at To: created before it,
	// and neither deleted nor moved to another plan by then.
	LiveAtEnd int `json:"live_at_end"`
}

// UsageReport is the usage over a period, one row per tenant, broker,
// service and plan with any instance or binding in it, sorted by those.
type UsageReport struct {
	// From and To are the period, as resolved from the query.
	From time.Time  `json:"from"`
	To   time.Time  `json:"to"`
	Rows []UsageRow `json:"rows"`
}

// UsagePoint is the count of live instances of one plan at one time, for
// a chart (LiveInstancesSeries).
type UsagePoint struct {
	// At is the time of the count.
	At time.Time `json:"at"`
	// Broker, Service and Plan name the plan.
	Broker  string `json:"broker"`
	Service string `json:"service_id"`
	Plan    string `json:"plan_id"`
	// Live counts the instances on the plan at At (of the query's tenant,
	// or of all tenants).
	Live int `json:"live"`
}

// usageKey names a row.
type usageKey struct{ tenant, broker, service, plan string }

// incarnation names one life of an instance: its id may come back after a
// deletion, with another Created.
type incarnation struct {
	broker, instance string
	created          int64
}

// usageSpan is an interval of one instance on one plan: [start, end),
// with end maxSpanEnd while it goes on.
type usageSpan struct {
	key        usageKey
	start, end int64 // microseconds since 1970
}

const maxSpanEnd = int64(1<<63 - 1)

// resolve fills the defaults of q and checks it.
func (q UsageQuery) resolve(now time.Time) (UsageQuery, error) {
	if q.To.IsZero() {
		q.To = now
	}
	if q.From.IsZero() {
		q.From = q.To.Add(-DefaultUsagePeriod)
	}
	q.From, q.To = q.From.UTC().Truncate(time.Microsecond), q.To.UTC().Truncate(time.Microsecond)
	if !q.From.Before(q.To) {
		return q, osb.Errorf(http.StatusBadRequest, "", "the usage period must start before it ends: from %s, to %s",
			q.From.Format(time.RFC3339Nano), q.To.Format(time.RFC3339Nano))
	}
	return q, nil
}

// usageScan is what a report reads: each instance's spans, and the
// bindings created in the period.
type usageScan struct {
	q        UsageQuery
	spans    func(inc incarnation, spans []usageSpan)
	bindings map[usageKey]int
}

// keep reports whether a record of tenant and broker is in q.
func (q UsageQuery) keep(tenant, broker string) bool {
	return (q.Tenant == "" || q.Tenant == tenant) && (q.Broker == "" || q.Broker == broker)
}

// run reads the store and calls sc.spans once per instance incarnation
// with its spans, sorted, over the period (spans ending before From may
// be missing: they do not matter).
func (sc *usageScan) run(ctx context.Context, st store.Store) error {
	from, to := sc.q.From.UnixMicro(), sc.q.To.UnixMicro()
	closed := map[incarnation][]usageSpan{}
	for r, err := range st.UsageRecords(ctx, sc.q.Broker, sc.q.From) {
		if err != nil {
			return err
		}
		if !sc.q.keep(r.Tenant, r.Broker) {
			continue
		}
		key := usageKey{r.Tenant, r.Broker, r.ServiceID, r.PlanID}
		if r.BindingID != "" {
			if c := r.Created.UnixMicro(); c >= from && c < to {
				sc.bindings[key]++
			}
			continue
		}
		inc := incarnation{r.Broker, r.InstanceID, r.Created.UnixMicro()}
		closed[inc] = append(closed[inc], usageSpan{key: key, end: r.Deleted.UnixMicro()})
	}
	for e, err := range st.Export(ctx) {
		if err != nil {
			return err
		}
		switch {
		case e.Instance != nil:
			in := e.Instance
			if !sc.q.keep(in.Tenant, in.Broker) || !made(in.LastOperation, store.KindProvision) {
				continue
			}
			inc := incarnation{in.Broker, in.InstanceID, in.Created.UnixMicro()}
			live := usageSpan{key: usageKey{in.Tenant, in.Broker, in.ServiceID, in.PlanID}, end: maxSpanEnd}
			if c := closed[inc]; c != nil {
				closed[inc] = append(c, live)
				continue
			}
			live.start = inc.created
			sc.spans(inc, []usageSpan{live})
		case e.Binding != nil:
			b := e.Binding
			if c := b.Created.UnixMicro(); sc.q.keep(b.Tenant, b.Broker) && made(b.LastOperation, store.KindBind) && c >= from && c < to {
				sc.bindings[usageKey{b.Tenant, b.Broker, b.ServiceID, b.PlanID}]++
			}
		}
	}
	for inc, spans := range closed {
		slices.SortFunc(spans, func(a, b usageSpan) int { return cmp.Compare(a.end, b.end) })
		start := inc.created
		for i := range spans {
			spans[i].start = start
			start = max(start, spans[i].end)
		}
		sc.spans(inc, spans)
	}
	return nil
}

// made reports whether an instance (create: store.KindProvision) or a
// binding (store.KindBind) counts: not one whose creation failed, or whose
// outcome is unknown (an operator released its lock before it came). One
// whose creation is in progress counts from its Created, as it will once
// it succeeds.
func made(op store.LastOperation, create string) bool {
	return op.Kind != create || (op.State != store.StateFailed && op.State != store.StateUnknown)
}

// ReportUsage is proxy.Gateway.Usage over the store st, with now the time a
// zero q.To stands for: for a command that opens the state store itself.
func ReportUsage(ctx context.Context, st store.Store, q UsageQuery, now time.Time) (UsageReport, error) {
	q, err := q.resolve(now)
	if err != nil {
		return UsageReport{}, err
	}
	from, to := q.From.UnixMicro(), q.To.UnixMicro()
	rows := map[usageKey]*UsageRow{}
	row := func(k usageKey) *UsageRow {
		r := rows[k]
		if r == nil {
			r = &UsageRow{Tenant: k.tenant, Broker: k.broker, Service: k.service, Plan: k.plan}
			rows[k] = r
		}
		return r
	}
	sc := &usageScan{q: q, bindings: map[usageKey]int{}}
	sc.spans = func(_ incarnation, spans []usageSpan) {
		var seen []usageKey // rows this instance counted in already
		for _, s := range spans {
			lo, hi := max(s.start, from), min(s.end, to)
			if lo >= hi {
				continue
			}
			r := row(s.key)
			r.InstanceHours += float64(hi-lo) / float64(time.Hour/time.Microsecond)
			if !slices.Contains(seen, s.key) {
				seen = append(seen, s.key)
				r.Instances++
			}
			if s.end > to {
				r.LiveAtEnd++
			}
		}
	}
	if err := sc.run(ctx, st); err != nil {
		return UsageReport{}, err
	}
	for k, n := range sc.bindings {
		row(k).Bindings += n
	}
	rep := UsageReport{From: q.From, To: q.To, Rows: make([]UsageRow, 0, len(rows))}
	for _, r := range rows {
		rep.Rows = append(rep.Rows, *r)
	}
	slices.SortFunc(rep.Rows, func(a, b UsageRow) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Broker, b.Broker),
			cmp.Compare(a.Service, b.Service), cmp.Compare(a.Plan, b.Plan))
	})
	return rep, nil
}

// UsageCSVHeader is the first line of UsageReport.WriteCSV.
var UsageCSVHeader = []string{"tenant", "broker", "service_id", "service_name", "plan_id", "plan_name", "instance_hours", "instances", "bindings", "live_at_end"}

// BillingHours is what instance_hours is rounded to in the CSV: a
// hundredth of an hour (36 seconds), half away from zero. The report's
// JSON keeps the exact figure.
const BillingHours = 0.01

// WriteCSV writes r as CSV: UsageCSVHeader, then a line per row, with the
// service and plan names names gives by id (empty for an id it lacks; nil:
// all empty) beside the ids, and instance_hours rounded to BillingHours
// with two decimals (osb-gateway usage, the console's download).
func (r UsageReport) WriteCSV(w io.Writer, names map[string]string) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(UsageCSVHeader); err != nil {
		return err
	}
	for _, x := range r.Rows {
		err := cw.Write([]string{x.Tenant, x.Broker, x.Service, names[x.Service], x.Plan, names[x.Plan],
			strconv.FormatFloat(BilledHours(x.InstanceHours), 'f', 2, 64),
			strconv.Itoa(x.Instances), strconv.Itoa(x.Bindings), strconv.Itoa(x.LiveAtEnd)})
		if err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// BilledHours rounds h to BillingHours, half away from zero.
func BilledHours(h float64) float64 { return math.Round(h/BillingHours) * BillingHours }

// ParseUsageQuery reads a usage query from a form or a URL's query:
// from and to (RFC 3339; empty: the defaults of UsageQuery), tenant and
// broker. A bad time is a 400 *osb.Error naming the field.
func ParseUsageQuery(v url.Values) (UsageQuery, error) {
	q := UsageQuery{Tenant: v.Get("tenant"), Broker: v.Get("broker")}
	for _, f := range []struct {
		name string
		to   *time.Time
	}{{"from", &q.From}, {"to", &q.To}} {
		s := strings.TrimSpace(v.Get(f.name))
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

// LiveInstancesSeries is proxy.Gateway.LiveInstancesSeries over the store
// st, with now the time a zero q.To stands for. It returns the live
// instances per plan (broker, service and plan; of q's tenant, or all
// tenants) at q.From and every step after it up to q.To included, for a chart: a point per plan and time, sorted
// by time then broker, service and plan; every plan with an instance at
// any of those times has a point at each (zero where it had none). A
// step that is not positive, or that makes more than MaxUsagePoints
// times, is a 400 *osb.Error. Its cost is Usage's.
func LiveInstancesSeries(ctx context.Context, st store.Store, q UsageQuery, step time.Duration, now time.Time) ([]UsagePoint, error) {
	q, err := q.resolve(now)
	if err != nil {
		return nil, err
	}
	if step <= 0 || q.To.Sub(q.From)/step >= MaxUsagePoints {
		return nil, osb.Errorf(http.StatusBadRequest, "", "the step must be positive and make at most %d points from %s to %s, got %s",
			MaxUsagePoints, q.From.Format(time.RFC3339), q.To.Format(time.RFC3339), step)
	}
	from, us := q.From.UnixMicro(), step.Microseconds()
	n := int(q.To.Sub(q.From)/step) + 1
	// at returns the index of the first point at or after t.
	at := func(t int64) int {
		if t <= from {
			return 0
		}
		return int(min((t-from+us-1)/us, int64(n)))
	}
	type plan struct{ broker, service, plan string }
	diffs := map[plan][]int{}
	sc := &usageScan{q: q, bindings: map[usageKey]int{}}
	sc.spans = func(_ incarnation, spans []usageSpan) {
		for _, s := range spans {
			a, b := at(s.start), n
			if s.end != maxSpanEnd {
				b = at(s.end)
			}
			if a >= b {
				continue
			}
			p := plan{s.key.broker, s.key.service, s.key.plan}
			d := diffs[p]
			if d == nil {
				d = make([]int, n+1)
				diffs[p] = d
			}
			d[a]++
			d[b]--
		}
	}
	if err := sc.run(ctx, st); err != nil {
		return nil, err
	}
	plans := make([]plan, 0, len(diffs))
	for p := range diffs {
		plans = append(plans, p)
	}
	slices.SortFunc(plans, func(a, b plan) int {
		return cmp.Or(cmp.Compare(a.broker, b.broker), cmp.Compare(a.service, b.service), cmp.Compare(a.plan, b.plan))
	})
	out := make([]UsagePoint, 0, n*len(plans))
	live := make([]int, len(plans))
	for i := range n {
		t := q.From.Add(time.Duration(i) * step)
		for j, p := range plans {
			live[j] += diffs[p][i]
			out = append(out, UsagePoint{At: t, Broker: p.broker, Service: p.service, Plan: p.plan, Live: live[j]})
		}
	}
	return out, nil
}
