package console

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy"
)

// What needs an operator: the overview opens with it, one line per
// matter, each linking to where it is handled. Nothing here is read that
// the rest of the overview does not read already.

// attention is one matter that needs an operator.
type attention struct {
	// What says it; Do what to do about it; Href where (empty: outside
	// the console, Do says where).
	What, Do, Href string
}

// attention lists what needs an operator, most urgent first.
func (c *Console) attention(d *overviewData, ops []proxy.Operation, drift []proxy.DriftReport, names map[string]string, now time.Time) []attention {
	var out []attention
	for _, b := range d.Brokers {
		switch {
		case b.Breaker == "open":
			out = append(out, attention{What: fmt.Sprintf("Broker %s: its circuit breaker is open; calls to it are refused at once.", b.Name),
				Do: "See the broker's row below; the breaker closes after a successful trial call.", Href: "#brokers"})
		case !b.Up():
			out = append(out, attention{What: fmt.Sprintf("Broker %s is down: %s", b.Name, b.CatalogError),
				Do: "See the broker's row below.", Href: "#brokers"})
		}
	}
	for _, r := range drift {
		live, kinds := 0, []string{}
		for _, it := range r.Items {
			live += it.LiveInstances
			what := it.Kind + " " + it.Service
			if it.Plan != "" {
				what += "/" + it.Plan
			}
			kinds = append(kinds, what)
		}
		if live > 0 {
			out = append(out, attention{What: fmt.Sprintf("Broker %s: its latest catalog strands %d live instance%s (%s).", r.Broker, live, plural(live), strings.Join(kinds, ", ")),
				Do: "Review the drift: accept the catalog, or have the broker restore what it removed.", Href: "/ui/drift"})
		}
	}
	var old []proxy.Operation
	for _, o := range ops {
		if now.Sub(o.Started) >= c.o.OldOperation {
			old = append(old, o)
		}
	}
	if len(old) > 0 {
		o := old[0]
		out = append(out, attention{What: fmt.Sprintf("%d operation%s in progress for more than %s; the oldest, %s of %s on broker %s, for %s.",
			len(old), plural(len(old)), age(c.o.OldOperation), o.Kind, instanceLabel(o, names), o.Broker, age(now.Sub(o.Started))),
			Do: "Reconcile, force a final state, or release.", Href: "/ui/operations?older=" + url.QueryEscape(olderBucket(c.o.OldOperation))})
	}
	if d.OrphansReported > 0 {
		out = append(out, attention{What: fmt.Sprintf("%d orphan candidate%s reported and not mitigated: a broker may hold what no platform does.", d.OrphansReported, plural(d.OrphansReported)),
			Do: "Check each with its broker and delete it there (orphan_mitigation: report).", Href: "/ui/operations#orphans"})
	}
	for _, cr := range d.Certs {
		if cr.Soon {
			out = append(out, attention{What: fmt.Sprintf("The %s certificate %s%s expires in %s (%s UTC).", cr.Use, cr.Subject, forBroker(cr.Broker), cr.In, cr.Expires),
				Do: "Renew it (a certificate file is reread when it changes).", Href: "#certs"})
		}
	}
	if d.ReloadFailures > 0 {
		out = append(out, attention{What: fmt.Sprintf("%d reload%s of gateway.yaml refused; the gateway runs the last configuration it accepted.", d.ReloadFailures, plural(int(d.ReloadFailures))),
			Do: "The gateway's log names what was wrong: fix gateway.yaml (osb-gateway check) and reload."})
	}
	for _, b := range d.NextCredential {
		out = append(out, attention{What: fmt.Sprintf("Broker %s accepts only its next credential (next_password): the rotation is done.", b),
			Do: "In gateway.yaml, make next_password the password and remove the old one."})
	}
	return out
}

// olderBucket is the largest age filter of the operations page at or
// under d.
func olderBucket(d time.Duration) string {
	name := ageBuckets[0].name
	for _, b := range ageBuckets {
		if b.min <= d {
			name = b.name
		}
	}
	return name
}

// instanceLabel names an operation's instance (and binding) for a
// sentence.
func instanceLabel(o proxy.Operation, names map[string]string) string {
	s := "instance " + o.InstanceID
	if n, ok := names[o.PlanID]; ok {
		s += " (" + n + ")"
	}
	if o.BindingID != "" {
		s = "binding " + o.BindingID + " of " + s
	}
	return s
}

func forBroker(b string) string {
	if b == "" {
		return ""
	}
	return " of broker " + b
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
