package emulate

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// ShimLost is the outcome of an emulated operation whose broker call was
// still in progress when its gateway process ended.
const ShimLost = "the gateway restarted during the broker call"

// ShimLostGrace is how long an emulated operation still in progress after
// its call's time may stay so once another replica challenged it
// (store.Shim.Challenged) before that replica reports it lost: a replica
// alive whose outcome waited for the store writes it within its retry
// queue's backoff (retryMax) and one store call (releaseTimeout), and this
// covers that twice over.
const ShimLostGrace = 2 * (guard.RetryMax + guard.ReleaseTimeout)

// lastOperationBody is a last_operation answer the gateway makes.
type lastOperationBody struct {
	State       string `json:"state"`
	Description string `json:"description,omitempty"`
}

// servePoll answers a last_operation poll of an operation the async shim
// owns: from the operation's lock (answerShimPoll), or, when the gateway no
// longer tracks it, from the inventory (answerUntracked). Other polls go
// on, but a binding poll to a broker too old for it (classify deferred its
// 412 to here) is refused.
func servePoll(g *guard.Guard, w http.ResponseWriter, r *http.Request, s *core.Scope, next http.Handler) {
	op := s.Call.Operation
	if l := s.Polled; l != nil && l.Shim.State != "" {
		if op == "" || op == l.Operation {
			answerShimPoll(g, w, r, s, next)
			return
		}
		s.Polled = nil // a poll of another operation does not settle the shim's
	}
	if upstream.Of(s.Route).Cfg.Emulate.AsyncAfter > 0 && strings.HasPrefix(op, ShimOperationPrefix) {
		answerUntracked(g, w, r, s, op)
		return
	}
	if s.ShimTooOld != nil {
		s.Fail(w, s.ShimTooOld)
		return
	}
	next.ServeHTTP(w, r)
}

// answerShimPoll answers the poll of the emulated operation s.polled: "in
// progress" until the broker call ended, then its outcome, which releases
// the lock through the same settle path as a broker's own terminal answer
// (unless the outcome holds it: a timeout). An operation still in
// progress past the time its call must have ended lost its gateway process
// and ends failed (settleLostShim). When the broker answered 202 after
// all, the poll goes to the broker with the broker's operation, and its
// answer settles the lock as any poll's does.
func answerShimPoll(g *guard.Guard, w http.ResponseWriter, r *http.Request, s *core.Scope, next http.Handler) {
	l := *s.Polled
	s.Operation = l.Operation
	if l.Shim.BrokerAsync {
		next.ServeHTTP(w, withOperation(r, l.Shim.BrokerOperation))
		return
	}
	s.Emulated = EmulatedShim
	if l.Shim.Replica == guard.ForcedReplica {
		s.Emulated = guard.EmulatedForced // an operator's forced state (proxy/internal/guard/reconcile.go)
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), guard.ReleaseTimeout)
	defer cancel()
	if l.Shim.State == store.StateInProgress && !g.Now().Before(l.Shim.CallEnds) {
		l = lostShim(g, ctx, upstream.Of(s.Route), l)
		*s.Polled = l
	}
	body := lastOperationBody{State: l.Shim.State, Description: l.Shim.Description}
	if l.Shim.State == store.StateInProgress {
		body.Description = "waiting for the broker's answer to the " + l.Kind
		if d := upstream.Of(s.Route).Cfg.Poll.RetryAfter; d > 0 { // brokers[].poll.retry_after, as for a broker's answer
			w.Header()["Retry-After"] = []string{strconv.FormatInt(core.RetryAfterSecs(d), 10)}
		}
	} else if !l.Shim.Hold {
		g.SettlePoll(ctx, rules.Answer{Status: http.StatusOK, Object: true, State: l.Shim.State, Description: l.Shim.Description}, s)
	}
	core.WriteAnswer(w, http.StatusOK, body)
}

// withOperation returns r with its operation query parameter set to op
// (removed when op is empty), for the broker; r itself is not changed.
func withOperation(r *http.Request, op string) *http.Request {
	q := r.URL.Query()
	if op == "" {
		q.Del("operation")
	} else {
		q.Set("operation", op)
	}
	r2 := new(http.Request)
	*r2 = *r
	u := *r.URL
	u.RawQuery = q.Encode()
	r2.URL = &u
	return r2
}

// lostShim decides on the emulated operation l, still in progress after
// the time its call must have ended: lost only when the replica that ran
// the call is gone. This replica's own operation is never lost (the
// process lives, and its outcome waits in its retry queue for the store).
// Another replica's is challenged first (Shim.Challenged) and reported
// lost by a poll shimLostGrace later if it is still in progress: a replica
// alive writes its pending outcome, which clears the challenge, well
// within that. It returns l as it now stands.
func lostShim(g *guard.Guard, ctx context.Context, up *upstream.Upstream, l store.Lock) store.Lock {
	now := g.Now()
	switch {
	case l.Shim.Replica == g.Replica:
		return l
	case l.Shim.Challenged.IsZero():
		l.Shim.Challenged = now
		if err := g.St.Update(ctx, l); err != nil {
			g.Metrics.StoreError("update")
			return l // the next poll challenges it again
		}
		g.Log.LogAttrs(ctx, slog.LevelWarn, "async shim: operation still in progress after its call's time; its replica has until the challenge ends to record the outcome",
			slog.String("broker", l.Broker), slog.String("instance_id", l.InstanceID), slog.String("operation", l.Operation),
			slog.String("replica", l.Shim.Replica), slog.Time("challenge_ends", now.Add(ShimLostGrace)))
		return l
	case now.Before(l.Shim.Challenged.Add(ShimLostGrace)):
		return l
	}
	return settleLostShim(g, ctx, up, l)
}

// settleLostShim ends the emulated operation l, whose broker call ran in a
// gateway process that is gone, as failed. The broker may still be working
// on the call (the process died, not the broker), so the lock is held as
// after a broker timeout: until hold_after_timeout after the later of now
// and the call's own end (its start plus the broker's timeout). Counted
// from now because when the process died is not known, only that it was
// before now, and the broker got the call at its start at the latest: the
// hold never ends before the one the process would have kept, nor less
// than a full hold_after_timeout after the loss is known. A provision or
// bind becomes an orphan candidate due when the hold ends, taking the held
// lock over (as for a client timeout in Cloud Controller's record), so the
// undo's DELETE never races the call. It returns l as settled; a store
// failure is logged, l comes back in progress, and the next poll tries
// again.
func settleLostShim(g *guard.Guard, ctx context.Context, up *upstream.Upstream, l store.Lock) store.Lock {
	lost := l
	now := g.Now()
	lost.Shim.State, lost.Shim.Description, lost.Shim.Challenged = store.StateFailed, ShimLost, time.Time{}
	if up != nil {
		if hold := guard.Later(now, l.Started.Add(up.Timeout)).Add(up.Cfg.HoldAfterTimeout); hold.After(now) {
			lost.Shim.Hold, lost.Deadline = true, hold
		}
		if ok, _ := rules.OrphanOnTimeout(rules.Call{Endpoint: rules.LockedBy(l.Kind)}); ok {
			due, owner := now, ""
			if lost.Shim.Hold {
				due, owner = lost.Deadline, l.Owner
			}
			if o, decision := g.NewOrphan(up, l, ShimLost+", which may have left it behind", due, owner); decision != "" {
				if lost.Shim.Hold {
					o.HoldUntil = due
				}
				if _, ok := g.PutCandidate(ctx, up, o, decision); !ok {
					return l
				}
			}
		}
	}
	if err := g.St.Update(ctx, lost); err != nil && !errors.Is(err, store.ErrNotFound) {
		g.Metrics.StoreError("update")
		g.Log.LogAttrs(ctx, slog.LevelError, "async shim: lost operation not recorded as failed", slog.String("broker", l.Broker),
			slog.String("instance_id", l.InstanceID), slog.String("operation", l.Operation), slog.String("error", err.Error()))
		return l
	}
	g.Log.LogAttrs(ctx, slog.LevelWarn, "async shim: the broker call's gateway process is gone; operation failed, the instance held until the broker call must be over",
		slog.String("broker", l.Broker), slog.String("kind", l.Kind), slog.String("instance_id", l.InstanceID),
		slog.String("binding_id", l.BindingID), slog.String("operation", l.Operation), slog.String("replica", l.Shim.Replica),
		slog.Time("call_ends", l.Shim.CallEnds), slog.Time("hold_ends", lost.Deadline))
	return lost
}

// SettleLostShims ends as failed every emulated operation in progress
// whose broker call ran in another process (settleLostShim): on a bolt
// file, which one process opens at a time, that process is gone.
func SettleLostShims(ctx context.Context, gd *guard.Guard) {
	locks, err := gd.St.List(ctx, store.ListFilter{})
	if err != nil {
		gd.Log.LogAttrs(ctx, slog.LevelWarn, "async shim: operations of the previous process not checked; their polls settle them",
			slog.String("error", err.Error()))
		return
	}
	for _, l := range locks {
		if l.Shim.State == store.StateInProgress && !l.Shim.BrokerAsync && l.Shim.Replica != gd.Replica {
			settleLostShim(gd, ctx, gd.Upstreams[l.Broker], l)
		}
	}
}

// answerUntracked answers the poll of an operation the shim owned but no
// longer tracks (its outcome was reported and its lock released, its lock
// expired, or an orphan mitigation took the lock over): the inventory's
// last operation when it is this one; 410 Gone for a deprovision or unbind
// of what the inventory does not hold; else "failed", saying so.
func answerUntracked(g *guard.Guard, w http.ResponseWriter, r *http.Request, s *core.Scope, op string) {
	kind, _, _ := strings.Cut(strings.TrimPrefix(op, ShimOperationPrefix), "-")
	up := upstream.Of(s.Route)
	var last store.LastOperation
	var err error
	if s.Call.Endpoint == rules.BindingLastOperation {
		var b store.Binding
		b, err = g.St.GetBinding(r.Context(), up.Name, s.Call.InstanceID, s.Call.BindingID)
		last = b.LastOperation
	} else {
		var in store.Instance
		in, err = g.St.GetInstance(r.Context(), up.Name, s.Call.InstanceID)
		last = in.LastOperation
	}
	s.Operation, s.Emulated = op, EmulatedShim
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		g.Metrics.StoreError("inventory")
		s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
			Description: "the gateway's operation state is unavailable, so it cannot tell how operation " + op + " ended; try again later"})
	case err == nil && last.Operation == op && last.State != "":
		core.WriteAnswer(w, http.StatusOK, lastOperationBody{State: last.State, Description: last.Description})
	case err != nil && (kind == store.KindDeprovision || kind == store.KindUnbind):
		core.WriteAnswer(w, http.StatusGone, struct{}{})
	default:
		core.WriteAnswer(w, http.StatusOK, lastOperationBody{State: store.StateFailed,
			Description: "the gateway no longer tracks this operation: its outcome was reported to an earlier poll, or it was given up when its deadline passed"})
	}
}
