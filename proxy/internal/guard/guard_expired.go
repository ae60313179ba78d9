package guard

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// whyExpired is why a provision or bind whose lock reached its deadline
// is an orphan candidate.
const whyExpired = "its call was never settled (its gateway was killed or lost mid-call) and its lock reached its deadline; the broker may have made it after that"

// orphanExpired looks at the locks the sweep just released at their
// deadline. A provision's or bind's lock ends so only when nothing settled
// its call: the replica running it died (kill -9, a lost node) before the
// broker answered, or at least before the answer was recorded. The broker
// may still have made what it was asked for, after the gateway was gone,
// and nothing tracks it: the inventory never saw it, the platform got no
// answer (and its own orphan-mitigation DELETE may be answered 410 by
// emulate.gone, which trusts the inventory). Such a call is an orphan
// candidate, per orphan_mitigation, due at once (the campaign's "kill -9
// during a bind the broker finishes after the kill"). A call whose success
// the inventory recorded was being delivered to the platform when its
// gateway died: it may be the platform's, so it is never undone. With
// keepQueued, a candidate already queued for the same instance or binding
// stays as it is (a sweep that recorded it before, a timeout's hold, a
// mitigation under way).
func (g *Guard) orphanExpired(ctx context.Context, expired []store.Lock, keepQueued bool) {
	gd := g
	for _, l := range expired {
		switch {
		case l.Kind != store.KindProvision && l.Kind != store.KindBind:
			continue
		case keepQueued && g.queued(ctx, l):
			continue
		case l.Async && l.Shim.State == "":
			continue // the broker's own operation: the platform's polls (or the watch) settle it
		case l.Shim.State == store.StateSucceeded:
			continue // the platform may have polled the success: it may be its own
		}
		// A call, or an async shim's call whose outcome is failed or never
		// came: the replica that would have recorded its orphan may have
		// died between the verdict and the candidate (the 30-minute
		// campaign's "kill -9 as a shimmed provision times out").
		u := g.Upstreams[l.Broker]
		if u == nil {
			continue
		}
		due := gd.Now()
		if gd.Inv.Keeps(u) {
			recorded, err := g.recorded(ctx, u, l)
			switch {
			case err != nil:
				due = NeverDue // unknown: reported, never undone
			case recorded:
				continue
			}
		} else {
			due = NeverDue // nothing tells whether the platform got it
		}
		o, decision := gd.NewOrphan(u, l, whyExpired, due, "")
		if decision == "" {
			continue
		}
		if _, ok := gd.PutCandidate(ctx, u, o, decision); !ok {
			gd.Log.LogAttrs(ctx, slog.LevelError, "orphan candidate of an expired call lost: the operation state refused it; the operator must check the broker",
				slog.String("broker", u.Name), slog.String("instance_id", l.InstanceID), slog.String("binding_id", l.BindingID))
		}
	}
}

// TakeOver is what a call owes the expired lock it took the key over from
// (store.Lock.Replaced) before the sweep released it: what the sweep does
// (its log line and orphanExpired). Without it, a platform's DELETE that
// came just after the deadline of a provision whose gateway was killed
// would find nothing to undo (emulate.gone answers 410 to an instance the
// inventory never saw), and what the broker made after the kill would be
// tracked by nothing (the 30-minute campaign's "DELETE takes over an
// expired lock before the sweep"). A candidate already queued for the
// same instance or binding (by a mitigation now taking the lock, or by a
// timeout's hold) stays as it is.
func (g *Guard) TakeOver(ctx context.Context, l store.Lock) {
	gd := g
	gd.logExpired(ctx, "operation deadline passed; lock taken over by a new call", l)
	g.orphanExpired(ctx, []store.Lock{l}, true)
}

// queued reports whether an orphan candidate of l's instance (or binding)
// is queued; a store error counts as not queued: a candidate replaced is
// better than one lost.
func (g *Guard) queued(ctx context.Context, l store.Lock) bool {
	u := g.Upstreams[l.Broker]
	if u == nil {
		return true
	}
	id := orphanIDOf(u, rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID})
	_, err := g.St.GetOrphan(ctx, id)
	return err == nil
}

// expiredCreates returns the provision and bind locks whose deadline
// passed at now that no sweep has removed yet. SweepOperations records
// their orphan candidates before it deletes them (ExpireDue), so that no
// moment passes in which an unsettled provision is neither a lock nor an
// orphan candidate: a quota counts both (quotaCall.flights), and one that
// counted in between would miss an instance the broker may hold. A
// sweeper that dies between the two steps loses nothing either. On a
// store error it returns nothing: the candidates are then recorded after
// the deletion, as before.
func (g *Guard) expiredCreates(ctx context.Context, now time.Time) []store.Lock {
	ls, err := g.St.List(ctx, store.ListFilter{Expired: true})
	if err != nil {
		return nil
	}
	out := ls[:0]
	for _, l := range ls {
		if !l.Deadline.After(now) && (l.Kind == store.KindProvision || l.Kind == store.KindBind) {
			out = append(out, l)
		}
	}
	return out
}

// notIn is the locks of expired not in seen (the same key and owner).
func notIn(expired, seen []store.Lock) []store.Lock {
	if len(seen) == 0 {
		return expired
	}
	out := make([]store.Lock, 0, len(expired))
	for _, l := range expired {
		if !slices.ContainsFunc(seen, func(x store.Lock) bool { return x.Key == l.Key && x.Owner == l.Owner }) {
			out = append(out, l)
		}
	}
	return out
}

// recorded reports whether the inventory holds what l's call creates as
// a success (a record of a create in progress or failed is none).
func (g *Guard) recorded(ctx context.Context, u *upstream.Upstream, l store.Lock) (bool, error) {
	var (
		op  store.LastOperation
		err error
	)
	if l.Kind == store.KindBind {
		var b store.Binding
		b, err = g.St.GetBinding(ctx, u.Name, l.InstanceID, l.BindingID)
		op = b.LastOperation
	} else {
		var in store.Instance
		in, err = g.St.GetInstance(ctx, u.Name, l.InstanceID)
		op = in.LastOperation
	}
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return op.Kind != l.Kind || op.State == "" || op.State == store.StateSucceeded, nil
}
