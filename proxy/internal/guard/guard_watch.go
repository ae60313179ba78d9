package guard

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// An async operation's lock holds until a platform's last_operation poll
// reports it ended. A platform that never learned of the operation (the
// 202 was written, then the connection reset before the platform read it:
// a client timeout, a worker restart) or that stopped polling leaves the
// lock to its deadline, days away, and meanwhile every call on the
// instance, its own orphan-mitigation DELETE first, gets 400 "Another
// operation for this service instance is in progress." The watch polls
// such an operation itself once it is older than state.reconcile.after,
// again every state.reconcile.every while it is in progress, and settles it
// as a platform's poll would.

// The watch is the background reconciler (state.reconcile; state.watch_after
// is its deprecated name): an operator's reconcile of one operation
// (reconcile.go) polls the same way, at once.
//
// The watch's bounds per sweep: at most watchBatch operations, polled by
// watchWorkers side by side, each within its broker's timeout.
const (
	watchBatch   = 32
	watchWorkers = 4
)

// Watched remembers when this gateway last polled each operation (by lock
// key and owner), so that one still in progress is polled once per
// state.reconcile.every, not every sweep, and the operations polled least
// recently go first when more are due than one sweep polls.
type Watched struct {
	mu   sync.Mutex
	Last map[string]time.Time
}

func watchID(l store.Lock) string { return l.Key + "\x00" + l.Owner }

// Due picks, of the locks ls, at most n async operations to poll at now:
// not the async shim's (it settles its own, and an operator's forced state
// is one), started at least after ago, and not polled by this gateway
// within every; the least recently polled first, then the oldest. It notes
// them polled at now, and forgets the operations no longer in ls.
func (w *Watched) Due(ls []store.Lock, now time.Time, after, every time.Duration, n int) []store.Lock {
	w.mu.Lock()
	defer w.mu.Unlock()
	kept := make(map[string]time.Time, len(w.Last))
	var due []store.Lock
	for _, l := range ls {
		if !l.Async || l.Shim.State != "" || now.Sub(l.Started) < after {
			continue
		}
		last, ok := w.Last[watchID(l)]
		if ok {
			kept[watchID(l)] = last
			if now.Sub(last) < every {
				continue
			}
		}
		due = append(due, l)
	}
	w.Last = kept
	slices.SortStableFunc(due, func(a, b store.Lock) int {
		if c := kept[watchID(a)].Compare(kept[watchID(b)]); c != 0 {
			return c
		}
		return a.Started.Compare(b.Started)
	})
	due = due[:min(len(due), n)]
	for _, l := range due {
		w.Last[watchID(l)] = now
	}
	return due
}

// watch polls the async operations older than state.reconcile.after (see
// watched.due) and settles each the broker says ended. An operation in
// progress, a failed poll or an unconfigured broker leave the lock as it
// is: the next sweep past another state.reconcile.every tries again, and
// the deadline ends it in any case.
func (g *Guard) watch(ctx context.Context) {
	gd := g
	if gd.WatchAfter <= 0 {
		return
	}
	ls, err := gd.St.List(ctx, store.ListFilter{})
	if err != nil {
		gd.Log.LogAttrs(ctx, slog.LevelWarn, "listing async operations to poll failed; the next sweep tries again",
			slog.String("error", err.Error()))
		return
	}
	due := gd.watched.Due(ls, gd.Now(), gd.WatchAfter, gd.WatchEvery, watchBatch)
	work := make(chan store.Lock)
	var wg sync.WaitGroup
	for range min(watchWorkers, len(due)) {
		wg.Go(func() {
			for l := range work {
				g.watchOne(ctx, l)
			}
		})
	}
	for _, l := range due {
		work <- l
	}
	close(work)
	wg.Wait()
}

// watchOne polls the operation l holds and settles it when it ended, as
// the reconciler's own call (audited, with an access line).
func (g *Guard) watchOne(ctx context.Context, l store.Lock) {
	u := g.Upstreams[l.Broker]
	if u == nil {
		return // the broker is no longer configured: the deadline ends it
	}
	start, id := g.Now(), core.NewRequestID()
	ctx = core.WithOperator(ctx, Reconciler, id)
	a, perr := pollOperation(u, ctx, l)
	res, err := g.settleReconciled(ctx, u, l, a, perr, false)
	if perr != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "the gateway's own poll of an async operation no platform settled failed; it tries again after state.reconcile.every",
			slog.String("broker", l.Broker), slog.String("kind", l.Kind), slog.String("instance_id", l.InstanceID),
			slog.String("binding_id", l.BindingID), slog.String("error", perr.Error()))
	}
	g.ownRecord(ctx, ownAction{action: "reconcile", who: Reconciler, requestID: id, lock: l, start: start, method: http.MethodGet, res: res, err: err})
}

// pollOperation asks the broker for the state of the operation l holds:
// GET last_operation of the instance (or binding), with the lock's
// service_id, plan_id and operation, the broker's credentials and version,
// as one of the gateway's own calls (metered and traced, linked to the
// span that started the operation).
func pollOperation(u *upstream.Upstream, ctx context.Context, l store.Lock) (rules.Answer, error) {
	ep := rules.InstanceLastOperation
	p := u.Target.JoinPath("v2", "service_instances", l.InstanceID)
	if l.BindingID != "" {
		ep = rules.BindingLastOperation
		p = p.JoinPath("service_bindings", l.BindingID)
	}
	p = p.JoinPath("last_operation")
	q := url.Values{}
	for k, v := range map[string]string{"service_id": l.ServiceID, "plan_id": l.PlanID, "operation": l.Operation} {
		if v != "" {
			q.Set(k, v)
		}
	}
	p.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, u.Timeout)
	defer cancel()
	req, err := u.OwnRequest(ctx, ep, l.TraceParent, http.MethodGet, p.String())
	if err != nil {
		return rules.Answer{}, err
	}
	res, err := u.RT.RoundTrip(req)
	if err != nil {
		return rules.Answer{}, u.Failed(err)
	}
	body, err := upstream.ReadOwn(res)
	if err != nil {
		return rules.Answer{}, &upstream.Withheld{Said: "its answer could not be read" + upstream.CutReason(err), Err: err}
	}
	return rules.ReadResponse(rules.Call{Endpoint: ep, InstanceID: l.InstanceID, BindingID: l.BindingID}, res.StatusCode, body), nil
}

// SettleOwn settles the operation l, which the broker's answer a to the
// gateway's own poll ended (or an operator's forced state), as a
// platform's poll would (settlePoll): the inventory records the outcome,
// then the lock is released. It reads the lock again first and leaves it
// when it is no longer l's (a platform's poll or another replica's
// reconciler settled it meanwhile, an operator released it), or no async
// operation unless sync (an operator's forced reconcile); a second
// settlement that slips in between records the same outcome and releases
// nothing (release compares the owner). A sync_within wait's orphan, which
// waits for this lock, is made due now, as the wait's own polls would
// (dueHeldOrphan). It reports whether it settled l.
func (g *Guard) SettleOwn(ctx context.Context, u *upstream.Upstream, l store.Lock, a rules.Answer, sync bool) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	cur, err := g.St.Get(ctx, l.Key)
	if err != nil || cur.Owner != l.Owner || (!cur.Async && !sync) {
		return false // settled meanwhile, or the store does not answer: the next try tells
	}
	c := rules.Call{Endpoint: rules.LockedBy(cur.Kind), InstanceID: cur.InstanceID, BindingID: cur.BindingID}
	if cur.Kind == store.KindProvision || cur.Kind == store.KindBind {
		if !g.DueHeldOrphan(ctx, orphanIDOf(u, c), cur) {
			return false // the orphan would wait for the lock's deadline: the next try
		}
	}
	s := &core.Scope{Tenant: cur.Tenant, Broker: u.Name, Call: c, Route: upstream.Route(u)}
	if g.Inv.Polled(ctx, s, cur, a) != nil { // under the lock, before it is released
		return false // the store did not take the record: the lock stays, the next try writes it
	}
	g.Release(ctx, cur)
	g.Metrics.SettledByWatch(u.Name, a.State)
	g.Log.LogAttrs(ctx, slog.LevelInfo, "async operation settled by the gateway's own poll: no platform polled it",
		slog.String("broker", cur.Broker), slog.String("tenant", cur.Tenant), slog.String("kind", cur.Kind),
		slog.String("instance_id", cur.InstanceID), slog.String("binding_id", cur.BindingID),
		slog.String("operation", cur.Operation), slog.String("state", a.State), slog.Time("started", cur.Started),
		slog.String("who", core.OperatorFrom(ctx)))
	return true
}

// DueHeldOrphan makes the orphan id due now when it waits for the lock l
// (taken over under l's owner: a sync_within wait past its bound), whose
// operation ended. False when the store did not take the change: the
// orphan then stays due at the lock's deadline, which ends the lock too.
func (g *Guard) DueHeldOrphan(ctx context.Context, id string, l store.Lock) bool {
	o, err := g.St.GetOrphan(ctx, id)
	if err != nil || !o.NextAttempt.Before(NeverDue) || o.LockOwner != l.Owner {
		return true
	}
	o.NextAttempt, o.LockOwner = g.Now(), ""
	return g.St.PutOrphan(ctx, o) == nil
}
