package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Reconciling a stuck operation. A lock whose async operation no platform
// polls any more (a lost 202, a platform that gave up) blocks its instance
// until its deadline. The background reconciler (guard_watch.go,
// state.reconcile) polls such operations by itself; Reconcile does it for
// one operation at an operator's request, at once, and can also force the
// final state the platform's next poll reads. ReleaseOperation drops a
// lock outright. Each is one audit record and one access line marked as
// the gateway's own (origin "gateway"), naming who asked.

// Reconciler is the Who of the background reconciler's polls.
const Reconciler = "reconciler"

// Outcomes of a reconcile (ReconcileResult.Outcome).
const (
	OutcomeSettledSucceeded = "settled succeeded" // the broker said succeeded: recorded, released
	OutcomeSettledFailed    = "settled failed"    // the broker said failed: recorded, released
	OutcomeGone             = "gone"              // 410 to a deprovision's or unbind's poll: it is gone, released
	OutcomeInProgress       = "still in progress" // the broker works on it: the lock stays
	OutcomeUnreadable       = "unreadable answer" // no state could be read of the broker's answer: the lock stays
	OutcomeNotEnded         = "not ended"         // an answer that does not end this kind of operation (410 to a provision's poll): the lock stays
	OutcomePollFailed       = "poll failed"       // the broker could not be reached or did not answer: the lock stays
	OutcomeForcedSucceeded  = "forced succeeded"  // the platform's next poll reads succeeded
	OutcomeForcedFailed     = "forced failed"     // the platform's next poll reads failed
	OutcomeReleased         = "released"          // an operator released the lock
	OutcomeSettledMeanwhile = "settled meanwhile" // a platform's poll, another replica or an operator settled it first
)

// ReconcileRequest asks the gateway to reconcile one operation lock.
type ReconcileRequest struct {
	// Broker is the broker's name in gateway.yaml; required.
	Broker string
	// InstanceID is the service instance; required.
	InstanceID string
	// BindingID, when set, names the binding whose operation is
	// reconciled; empty: the instance's own.
	BindingID string
	// State, when set, is the final state to force: "succeeded" or
	// "failed". Empty: the gateway polls the broker's last_operation with
	// the lock's operation and settles the lock by the answer.
	State string
	// Description is the forced state's description, which the platform
	// reads; only with State.
	Description string
	// Release, with State, records the forced state in the inventory and
	// releases the lock at once instead of at the platform's next poll
	// (which then goes to the broker, as for any untracked operation).
	Release bool
	// Force acts on a lock that is no async operation (a synchronous call
	// in flight, or held after a timeout): without it such a lock is
	// refused with 409. Forced, a poll settles it by the broker's answer,
	// and a forced State is recorded and the lock released at once (no
	// platform polls a synchronous call).
	Force bool
	// Who names the operator, for the audit record and the logs; required
	// (the admin API passes its caller, the console its user).
	Who string
}

// ReconcileResult is what a reconcile did.
type ReconcileResult struct {
	// Outcome is one of the Outcome constants: "settled succeeded",
	// "still in progress", "gone", "forced failed", …
	Outcome string `json:"outcome"`
	// Answer says in a few words what the broker answered the gateway's
	// poll ("200 state succeeded", "410 Gone", "502: connection refused"),
	// or, for a forced state, what the platform's next poll reads.
	Answer string `json:"answer"`
	// Status is the broker's HTTP status to the poll; 0 when there was
	// no poll or no answer.
	Status int `json:"status,omitempty"`
	// State and Description are the state read or forced, and its
	// description (the broker's for a failure, or the operator's).
	State       string `json:"state,omitempty"`
	Description string `json:"description,omitempty"`
	// Released is set when the lock was released.
	Released bool `json:"released"`
}

// Reconcile reconciles the operation lock req names: it polls the
// broker's last_operation with the lock's operation, as one of the
// gateway's own calls, and settles the lock by the answer as a platform's
// poll would (succeeded, failed, or 410 for a deletion: the inventory
// records it, the lock is released; in progress: the lock stays); or,
// with req.State, it forces the final state the platform's next poll
// reads, from the gateway (every replica answers it), releasing the lock
// after that poll (or at once with req.Release). It writes one audit
// record and one access line naming req.Who. Errors are *osb.Error: 400
// for a request that is not one, 404 when no such broker or lock exists,
// 409 for a lock that is no async operation (without req.Force) or an
// emulated one whose broker call runs, 502 when the broker could not be
// polled (the lock stays), 503 when the state store failed.
func (g *Guard) Reconcile(ctx context.Context, req ReconcileRequest) (ReconcileResult, error) {
	if err := req.check(); err != nil {
		return ReconcileResult{}, err
	}
	u := g.Upstreams[req.Broker]
	if u == nil {
		return ReconcileResult{}, osb.Errorf(http.StatusNotFound, "", "no broker %q in the gateway's configuration", req.Broker)
	}
	l, err := g.reconcilable(ctx, u, req)
	if err != nil {
		if res, ok, rerr := g.reconcileReleased(ctx, u, req, err); ok { // reconcile_released.go
			return res, rerr
		}
		return ReconcileResult{}, err
	}
	start := g.Now()
	var res ReconcileResult
	if req.State != "" {
		res, err = g.force(ctx, u, l, req)
		g.ownRecord(ctx, ownAction{action: "force", who: req.Who, lock: l, start: start, method: http.MethodPost, res: res, err: err})
		return res, err
	}
	id := core.NewRequestID()
	octx := core.WithOperator(ctx, req.Who, id)
	a, perr := pollOperation(u, octx, pollTarget(l))
	res, err = g.settleReconciled(octx, u, l, a, perr, !l.Async)
	g.ownRecord(ctx, ownAction{action: "reconcile", who: req.Who, requestID: id, lock: l, start: start, method: http.MethodGet, res: res, err: err})
	return res, err
}

// check reports what is wrong with req, as a 400.
func (req ReconcileRequest) check() error {
	switch {
	case req.Broker == "" || req.InstanceID == "":
		return osb.Errorf(http.StatusBadRequest, "", "a reconcile names a broker and an instance: got broker %q, instance %q", req.Broker, req.InstanceID)
	case req.Who == "":
		return osb.Errorf(http.StatusBadRequest, "", "a reconcile names who asked for it (it is audited): got nobody")
	case req.State != "" && req.State != store.StateSucceeded && req.State != store.StateFailed:
		return osb.Errorf(http.StatusBadRequest, "", "a forced state is %q or %q: got %q", store.StateSucceeded, store.StateFailed, req.State)
	case req.State == "" && (req.Description != "" || req.Release):
		return osb.Errorf(http.StatusBadRequest, "", "a description or release goes with a forced state: expected state %q or %q, got none", store.StateSucceeded, store.StateFailed)
	case len(req.Description) > core.MaxOperationLen:
		return osb.Errorf(http.StatusBadRequest, "", "a forced state's description is at most %d bytes: got %d", core.MaxOperationLen, len(req.Description))
	}
	return nil
}

// reconcilable reads the lock req names and checks that it can be
// reconciled.
func (g *Guard) reconcilable(ctx context.Context, u *upstream.Upstream, req ReconcileRequest) (store.Lock, error) {
	what := fmt.Sprintf("instance %q of broker %q", req.InstanceID, req.Broker)
	c := rules.Call{Endpoint: rules.InstanceLastOperation, InstanceID: req.InstanceID}
	if req.BindingID != "" {
		what = fmt.Sprintf("binding %q of ", req.BindingID) + what
		c = rules.Call{Endpoint: rules.BindingLastOperation, InstanceID: req.InstanceID, BindingID: req.BindingID}
	}
	l, err := g.St.Get(ctx, u.LockKey(req.InstanceID, req.BindingID))
	switch {
	case errors.Is(err, store.ErrNotFound) || (err == nil && !polls(c, l)):
		return l, osb.Errorf(http.StatusNotFound, "", "no operation in progress on %s: nothing to reconcile", what)
	case err != nil:
		return l, storeError("reading the operation", err)
	case l.Shim.State == store.StateInProgress && !l.Shim.BrokerAsync && req.State == "":
		return l, osb.Errorf(http.StatusConflict, "", "the %s on %s is the async shim's: its broker call runs in gateway replica %q and its outcome settles it; expected an operation the broker runs asynchronously (force a state to end it anyway)",
			l.Kind, what, l.Shim.Replica)
	case l.Shim.State != "" && l.Shim.State != store.StateInProgress:
		return l, osb.Errorf(http.StatusConflict, "", "the %s on %s already ended %s (reported to the platform's next poll); release it to drop it now",
			l.Kind, what, l.Shim.State)
	case !l.Async && !req.Force:
		return l, osb.Errorf(http.StatusConflict, "", "the lock on %s is a %s call in flight (synchronous, held since %s), not an async operation a platform polls; expected an async operation (set force to poll or settle it anyway)",
			what, l.Kind, l.Started.UTC().Format(time.RFC3339))
	}
	return l, nil
}

// pollTarget is the lock whose operation a reconcile polls: an async shim
// operation the broker took asynchronously is polled with the broker's own
// operation.
func pollTarget(l store.Lock) store.Lock {
	if l.Shim.BrokerAsync {
		l.Operation = l.Shim.BrokerOperation
	}
	return l
}

// settleReconciled settles l by the answer a to the gateway's own poll
// (perr: the poll failed) and says what came of it; sync allows a lock
// that is no async operation (a forced reconcile).
func (g *Guard) settleReconciled(ctx context.Context, u *upstream.Upstream, l store.Lock, a rules.Answer, perr error, sync bool) (ReconcileResult, error) {
	if perr != nil {
		e := osb.AsError(perr)
		res := ReconcileResult{Outcome: OutcomePollFailed, Answer: fmt.Sprintf("%d: %s", e.Status, e.Description)}
		return res, &osb.Error{Status: http.StatusBadGateway, Err: perr,
			Description: "the broker's last_operation could not be polled (" + e.Description + "); the lock stays: try again later"}
	}
	res := ReconcileResult{Status: a.Status, State: a.State, Description: a.Description, Answer: describeAnswer(a)}
	kind := rules.LockedBy(l.Kind)
	switch {
	case a.Ends(kind):
		settled := g.SettleOwn(ctx, u, l, a, sync)
		res.Outcome, res.Released = outcomeOf(a.State), settled
		if !settled {
			res.Outcome = OutcomeSettledMeanwhile
		}
	case a.State == rules.PollInProgress:
		res.Outcome = OutcomeInProgress
	case a.State == rules.PollGone:
		res.Outcome = OutcomeNotEnded
	default:
		res.Outcome = OutcomeUnreadable
	}
	return res, nil
}

// outcomeOf is the outcome of a poll answer that ended the operation.
func outcomeOf(state string) string {
	switch state {
	case rules.PollSucceeded:
		return OutcomeSettledSucceeded
	case rules.PollFailed:
		return OutcomeSettledFailed
	}
	return OutcomeGone
}

// describeAnswer says in a few words what the broker answered a poll.
func describeAnswer(a rules.Answer) string {
	switch {
	case a.State == rules.PollGone:
		return fmt.Sprintf("%d Gone", a.Status)
	case a.State != "":
		return fmt.Sprintf("%d state %s", a.Status, a.State)
	case a.Malformed():
		return fmt.Sprintf("%d with a body that is no JSON object", a.Status)
	case a.Status >= 200 && a.Status <= 299:
		return fmt.Sprintf("%d without a state", a.Status)
	case a.Description != "":
		return fmt.Sprintf("%d %s", a.Status, a.Description)
	}
	return fmt.Sprintf("%d", a.Status)
}

// force sets the final state req.State on the operation l: the lock's
// emulated outcome (store.Shim), which the platform's next poll of l's
// operation reads from whichever replica it reaches and which then
// releases the lock (answerShimPoll); with req.Release, or for a lock that
// is no async operation, the state is recorded in the inventory and the
// lock released at once.
func (g *Guard) force(ctx context.Context, u *upstream.Upstream, l store.Lock, req ReconcileRequest) (ReconcileResult, error) {
	res := ReconcileResult{State: req.State, Description: req.Description, Outcome: OutcomeForcedFailed}
	if req.State == store.StateSucceeded {
		res.Outcome = OutcomeForcedSucceeded
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	if req.Release || !l.Async {
		a := rules.Answer{Status: http.StatusOK, Object: true, State: req.State, Description: req.Description}
		if !g.SettleOwn(ctx, u, l, a, true) {
			res.Outcome = OutcomeSettledMeanwhile
			return res, nil
		}
		res.Released, res.Answer = true, "recorded "+req.State+" and released the lock; the platform's next poll goes to the broker"
		return res, nil
	}
	f := l
	f.Shim = store.Shim{State: req.State, Description: req.Description, Replica: ForcedReplica}
	switch err := g.St.Update(ctx, f); {
	case errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNotOwner):
		res.Outcome = OutcomeSettledMeanwhile
		return res, nil
	case err != nil:
		g.Metrics.StoreError("update")
		return ReconcileResult{}, storeError("recording the forced state", err)
	}
	res.Answer = fmt.Sprintf("the platform's next poll reads %s", req.State)
	g.Log.LogAttrs(ctx, slog.LevelWarn, "operation state forced by an operator; the platform's next poll reads it",
		slog.String("broker", l.Broker), slog.String("tenant", l.Tenant), slog.String("kind", l.Kind),
		slog.String("instance_id", l.InstanceID), slog.String("binding_id", l.BindingID),
		slog.String("operation", l.Operation), slog.String("state", req.State), slog.String("who", req.Who))
	return res, nil
}

// ForcedReplica is store.Shim.Replica of an operator's forced state: no
// gateway process runs a broker call for it.
const ForcedReplica = "forced by an operator"

// EmulatedForced is Scope.Emulated for the answer to a platform's poll of
// an operation whose final state an operator forced.
const EmulatedForced = "forced"

// ReleaseOperation releases the lock of the instance (or of its binding,
// when binding is set) of broker at once, whatever it holds, and writes
// one audit record naming who and why (reason, required). The broker is not
// called; the inventory records the operation with state unknown
// (release_inventory.go), which a reconcile settles later. Errors are *osb.Error: 400 without who or
// reason, 404 when no such lock exists, 503 when the state store failed.
func (g *Guard) ReleaseOperation(ctx context.Context, broker, instance, binding, who, reason string) error {
	_, err := g.ReleaseLock(ctx, broker, instance, binding, who, reason)
	return err
}

// ReleaseLock is ReleaseOperation, returning the released lock.
func (g *Guard) ReleaseLock(ctx context.Context, broker, instance, binding, who, reason string) (store.Lock, error) {
	if who == "" || reason == "" {
		return store.Lock{}, osb.Errorf(http.StatusBadRequest, "", "a release names who asks and why (it is audited): got who %q, reason %q", who, reason)
	}
	key, what := store.LockKey(broker, instance), fmt.Sprintf("instance %q", instance)
	if binding != "" {
		key, what = store.BindingLockKey(broker, instance, binding), fmt.Sprintf("binding %q of instance %q", binding, instance)
	}
	start := g.Now()
	l, err := g.St.ForceRelease(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return l, osb.Errorf(http.StatusNotFound, "", "no operation in progress on %s of broker %q", what, broker)
	case err != nil:
		return l, storeError("releasing the operation", err)
	}
	g.markReleasedHeld(ctx, l, who, reason) // release_inventory.go
	res := ReconcileResult{Outcome: OutcomeReleased, Released: true, Description: reason}
	g.ownRecord(ctx, ownAction{action: "release", who: who, lock: l, start: start, method: http.MethodDelete, res: res})
	return l, nil
}
