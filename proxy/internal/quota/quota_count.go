package quota

import (
	"context"
	"errors"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/rules"
)

// inFlight is a provision in flight: an instance the broker may hold (or be
// making) that the inventory does not record yet.
type inFlight struct {
	broker, instanceID string
	serviceID, planID  string // either may be empty: unknown
}

// flights returns the tenant's provisions in flight on the brokers the
// held quotas count, but the one of instance self on broker (the
// provision being counted), each instance once:
//
//   - an instance whose provision's operation lock is held (its call is
//     at the broker, or its answer is being settled; an async operation
//     until its end), or is past its deadline and not yet swept: its
//     replica died with the call at the broker, which may have made it
//     after;
//   - an instance named by a queued orphan candidate of a provision (an
//     undo still to make, or only reported): the broker may hold it until
//     the undo is confirmed or an operator removes the candidate.
//
// The sweep records a candidate before it deletes the lock
// (expiredCreates), so no such provision escapes both. An instance the
// inventory records is counted there, not here. A shimmed provision whose
// broker said it failed (and nothing is left to wait for) made nothing.
// Cost: one listing of the store's locks and one of its orphans, and one
// inventory read per instance in flight.
func (qc *quotaCall) flights(ctx context.Context, broker, self string) ([]inFlight, error) {
	counted := func(b, id string) bool {
		if b == broker && id == self {
			return false
		}
		for _, h := range qc.held {
			if h.q.counts(b) {
				return true
			}
		}
		return false
	}
	seen := map[[2]string]inFlight{}
	locks, err := qc.g.St.List(ctx, store.ListFilter{Tenant: qc.s.Tenant, Expired: true})
	if err != nil {
		return nil, err
	}
	for _, l := range locks {
		if l.Kind != store.KindProvision || !counted(l.Broker, l.InstanceID) ||
			(l.Shim.State == store.StateFailed && !l.Shim.Hold) {
			continue
		}
		seen[[2]string{l.Broker, l.InstanceID}] = inFlight{l.Broker, l.InstanceID, l.ServiceID, l.PlanID}
	}
	orphans, err := qc.g.St.ListOrphans(ctx)
	if err != nil {
		return nil, err
	}
	for _, o := range orphans {
		if o.Kind != store.KindDeprovision || o.Tenant != qc.s.Tenant || !counted(o.Broker, o.InstanceID) {
			continue
		}
		seen[[2]string{o.Broker, o.InstanceID}] = inFlight{o.Broker, o.InstanceID, o.ServiceID, o.PlanID}
	}
	out := make([]inFlight, 0, len(seen))
	for _, f := range seen {
		_, err := qc.g.St.GetInstance(ctx, f.broker, f.instanceID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			out = append(out, f)
		case err != nil:
			return nil, err
		}
	}
	return out, nil
}

// count is how many of the tenant's instances count against q: those the
// inventory records (the store's counters for a quota on every service
// and plan, else the tenant's instances listed, stopping once the maximum
// is reached), each broker once, and those of flights on q's brokers.
// flights are read first: a provision in flight is then never missed (its
// record is written before its lock goes, and its candidate before its
// expired lock is swept), and one recorded in the instant between the two
// reads counts twice: a refusal that a retry clears, never an admission
// past the maximum.
func (qc *quotaCall) count(ctx context.Context, q *Rule, ix *rules.Index, flights []inFlight) (quotaCount, error) {
	c := quotaCount{q: q}
	for _, b := range q.Brokers {
		f := store.InstanceFilter{Broker: b, Tenant: q.Tenant}
		if q.Service == "" && q.Plan == "" {
			n, err := qc.g.St.CountInstances(ctx, f)
			if err != nil {
				return c, err
			}
			c.recorded += n
			continue
		}
		for cursor := ""; ; {
			page, next, err := qc.g.St.ListInstances(ctx, f, cursor, store.MaxListLimit)
			if err != nil {
				return c, err
			}
			for _, in := range page {
				if q.Matches(ix, in.ServiceID, in.PlanID) {
					c.recorded++
				}
			}
			if next == "" || c.recorded >= q.Max {
				break
			}
			cursor = next
		}
	}
	for _, f := range flights {
		if q.counts(f.broker) && q.mayMatch(ix, f.serviceID, f.planID) {
			c.inFlight++
		}
	}
	return c, nil
}
