package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

type operationRow struct {
	proxy.Operation
	Age, DeadlineIn string
	Place           proxy.PlatformNames // the organization and space of the instance, from the inventory
}

type orphanRow struct {
	proxy.OrphanInfo
	NextAttempt string
	Place       proxy.PlatformNames
}

type operationsData struct {
	Broker, Tenant, Kind, Older string
	Filtered                    bool
	BrokerNames, TenantNames    []string
	Kinds, Ages                 []string
	Ops                         []operationRow
	Orphans                     []orphanRow
	AgeChart                    template.HTML
	Names                       map[string]string // service and plan names by id
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
		Kinds: []string{store.KindProvision, store.KindUpdate, store.KindDeprovision, store.KindBind, store.KindUnbind}, Names: c.catalogNames(r.Context())}
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
	placeRows(r.Context(), v, d)
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
	return back, fmt.Sprintf("Released the %s lock on %s of broker %s. The inventory records the %s's outcome as unknown "+
		"(usage leaves out a provision or bind of unknown outcome); reconcile the instance to settle it.", o.Kind, what, broker, o.Kind), nil
}

// reconcile polls the broker for an operation's state, or forces one
// (confirmed on the force page), from the operations page.
func (c *Console) reconcile(r *http.Request, who string) (string, string, error) {
	f := r.PostForm
	req := proxy.ReconcileRequest{Broker: f.Get("broker"), InstanceID: f.Get("instance"), BindingID: f.Get("binding"), Who: who}
	back := "/ui/operations"
	if b := f.Get("back"); b != "" {
		back = safeNext(b)
	}
	if f.Get("action") == "force" {
		req.State, req.Description = f.Get("state"), strings.TrimSpace(f.Get("description"))
		if err := forceChoice(req.State); err != nil {
			return back, "", err
		}
		if f.Get("confirm") != "yes" {
			return back, "", errors.New("a forced state is confirmed on its own page first: use Force… and confirm there")
		}
	}
	res, err := c.o.View.Reconcile(r.Context(), req)
	if err != nil {
		return back, "", actionError(err)
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
	return back, msg + ".", nil
}

// forceChoice checks the final state an operator picked.
func forceChoice(state string) error {
	if state != store.StateSucceeded && state != store.StateFailed {
		return fmt.Errorf("the Force action needs a final state, and none is preselected: pick %q or %q (got %q)", store.StateSucceeded, store.StateFailed, state)
	}
	return nil
}

type forceData struct {
	Op                        proxy.Operation
	Found                     bool
	State, Description, Reads string
	Names                     map[string]string
}

// forcePage is the confirmation of a forced state: what the platform's
// next poll will read, and a form (with the CSRF token) that does it.
// Without a state it says so and offers nothing to confirm.
func (c *Console) forcePage(r *http.Request, f *frame) (any, error) {
	q := r.URL.Query()
	v := c.o.View
	d := &forceData{State: q.Get("state"), Description: strings.TrimSpace(q.Get("description")), Names: c.catalogNames(r.Context())}
	broker, instance, binding := q.Get("broker"), q.Get("instance"), q.Get("binding")
	ops, err := v.InstanceOperations(r.Context(), broker, instance)
	if err != nil {
		return d, stateError("reading the operation", err)
	}
	for _, o := range ops {
		if o.BindingID == binding {
			d.Op, d.Found = o, true
		}
	}
	if !d.Found {
		return d, osb.Errorf(http.StatusNotFound, "", "no operation in progress on instance %q of broker %q: nothing to force", instance, broker)
	}
	if err := forceChoice(d.State); err != nil {
		return d, err
	}
	body := fmt.Sprintf(`{"state": %q`, d.State)
	if d.Description != "" {
		body += fmt.Sprintf(`, "description": %q`, d.Description)
	}
	d.Reads = body + "}"
	return d, nil
}

// placeRows names the organization and space of every listed instance, as
// the inventory records them (one read per instance listed).
func placeRows(ctx context.Context, v *proxy.View, d *operationsData) {
	keys := make([][2]string, 0, len(d.Ops)+len(d.Orphans))
	for _, o := range d.Ops {
		keys = append(keys, [2]string{o.Broker, o.InstanceID})
	}
	for _, o := range d.Orphans {
		keys = append(keys, [2]string{o.Broker, o.InstanceID})
	}
	places := v.PlacesOf(ctx, keys)
	for i := range d.Ops {
		d.Ops[i].Place = places[[2]string{d.Ops[i].Broker, d.Ops[i].InstanceID}]
	}
	for i := range d.Orphans {
		d.Orphans[i].Place = places[[2]string{d.Orphans[i].Broker, d.Orphans[i].InstanceID}]
	}
}
