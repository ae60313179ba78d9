package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

type instancesData struct {
	Q                        proxy.InstanceQuery
	BrokerNames, TenantNames []string
	Found                    []proxy.InstanceInfo
	Scanned                  int
	Truncated                bool
	Names                    map[string]string // service and plan names by id
}

func (c *Console) instances(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	q := r.URL.Query()
	d := &instancesData{Q: proxy.InstanceQuery{Tenant: q.Get("tenant"), Broker: q.Get("broker"), Service: strings.TrimSpace(q.Get("service")),
		Plan: strings.TrimSpace(q.Get("plan")), ID: strings.TrimSpace(q.Get("id"))}, Names: c.catalogNames(r.Context())}
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

// instanceAudit is how many audit records the instance page shows.
const instanceAudit = 50

type instanceData struct {
	Broker, ID string
	Found      bool
	Record     store.Instance
	Platform   proxy.PlatformNames
	Params     bool
	Bindings   []proxy.StoredBinding
	Ops        []operationRow
	Orphans    []proxy.OrphanInfo
	// Counted says whether usage counts the instance as live, Hours its
	// instance-hours over the last 30 days (both as the usage report
	// reckons them).
	Counted      bool
	Hours        string
	Audit        []audit.Record
	AuditMatched int
	AuditError   string
	Names        map[string]string
}

// instance is an instance's story: its record, bindings, lock and orphan
// state, usage, and audit records, newest first.
func (c *Console) instance(r *http.Request, f *frame) (any, error) {
	v := c.o.View
	ctx := r.Context()
	now := v.Now()
	d := &instanceData{Broker: r.PathValue("broker"), ID: r.PathValue("id"), Names: c.catalogNames(r.Context())}
	f.Title = "Instance " + d.ID
	in, err := v.GetInstance(ctx, d.Broker, d.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return d, stateError("reading the instance", err)
	default:
		d.Found, d.Record, d.Params = true, in.Record, in.ParametersStored
		d.Platform = proxy.NamesOf(in.Record.Context)
		op := in.Record.LastOperation
		d.Counted = op.Kind != store.KindProvision || (op.State != store.StateFailed && op.State != store.StateUnknown)
		if d.Counted {
			from := maxTime(in.Record.Created, now.Add(-proxy.DefaultUsagePeriod))
			d.Hours = fmt.Sprintf("%.2f", proxy.BilledHours(now.Sub(from).Hours()))
		}
	}
	if d.Bindings, err = v.ListBindings(ctx, d.Broker, d.ID); err != nil {
		return d, stateError("reading the bindings", err)
	}
	ops, err := v.InstanceOperations(ctx, d.Broker, d.ID)
	if err != nil {
		return d, stateError("reading the operations", err)
	}
	for _, o := range ops {
		d.Ops = append(d.Ops, operationRow{Operation: o, Age: age(now.Sub(o.Started)), DeadlineIn: age(o.Deadline.Sub(now))})
	}
	orphans, err := v.Orphans(ctx)
	if err != nil {
		return d, stateError("reading the orphans", err)
	}
	for _, o := range orphans {
		if o.Broker == d.Broker && o.InstanceID == d.ID {
			d.Orphans = append(d.Orphans, o)
		}
	}
	page, err := v.AuditRecords(ctx, proxy.AuditQuery{Filter: audit.Filter{Broker: d.Broker, InstanceID: d.ID}, Limit: instanceAudit})
	if err != nil {
		d.AuditError = auditError(err)
	}
	d.Audit, d.AuditMatched = page.Records, page.Matched
	if !d.Found && len(d.Bindings) == 0 && len(d.Ops) == 0 && len(d.Audit) == 0 {
		return d, fmt.Errorf("the gateway knows nothing of instance %q of broker %q: no record, lock or audit record", d.ID, d.Broker)
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

// maxTime is the later of a and b.
func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
