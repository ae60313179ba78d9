package guard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Settling a released operation. A release leaves the operation's record
// with state unknown (release_inventory.go) and no lock; a reconcile of
// that instance (or binding) takes the lock for itself, polls the
// broker's last_operation with the operation the released lock held, and
// records the outcome as a platform's poll would (succeeded, failed, or
// gone for a deletion); with a forced state it records that state
// instead. An answer that does not end the operation leaves the record
// unknown.

// releasedHold bounds the lock a reconcile of a released operation holds
// while it polls.
const releasedHold = time.Minute

// reconcileReleased reconciles the released operation req names, when no
// lock holds it (notFound is the 404 the lock lookup gave) and its record
// says unknown; ok is false when there is no such record, and the caller
// answers notFound.
func (g *Guard) reconcileReleased(ctx context.Context, u *upstream.Upstream, req ReconcileRequest, notFound error) (res ReconcileResult, ok bool, err error) {
	var e *osb.Error
	if !errors.As(notFound, &e) || e.Status != http.StatusNotFound || !g.Inv.Keeps(u) {
		return res, false, nil
	}
	op, tenant, service, plan, found := g.releasedRecord(ctx, u, req)
	if !found {
		return res, false, nil
	}
	now := g.Now()
	l := store.Lock{Key: u.LockKey(req.InstanceID, req.BindingID), Owner: core.NewRequestID(), Kind: op.Kind, Tenant: tenant, Broker: u.Name,
		InstanceID: req.InstanceID, BindingID: req.BindingID, ServiceID: service, PlanID: plan, Async: true, Operation: op.Operation,
		Started: op.Started, Deadline: now.Add(releasedHold)}
	held, aerr := g.St.Acquire(ctx, l)
	if aerr != nil {
		if errors.Is(aerr, store.ErrHeld) {
			return res, true, osb.Errorf(http.StatusConflict, "", "instance %q of broker %q has a %s in progress now: reconcile that operation instead", req.InstanceID, u.Name, held.Kind)
		}
		return res, true, storeError("taking the lock of the released operation", aerr)
	}
	l = held
	defer g.Release(context.WithoutCancel(ctx), l)
	s := &core.Scope{Tenant: tenant, Broker: u.Name, Call: rules.Call{Endpoint: rules.LockedBy(op.Kind), InstanceID: req.InstanceID, BindingID: req.BindingID},
		Route: upstream.Route(u)}
	if req.State != "" {
		a := rules.Answer{Status: http.StatusOK, Object: true, State: req.State, Description: req.Description}
		g.Inv.Polled(ctx, s, l, a)
		res = ReconcileResult{Outcome: OutcomeForcedFailed, State: req.State, Description: req.Description, Released: true,
			Answer: "recorded " + req.State + " for the released operation"}
		if req.State == store.StateSucceeded {
			res.Outcome = OutcomeForcedSucceeded
		}
		g.ownRecord(ctx, ownAction{action: "force", who: req.Who, lock: l, start: now, method: http.MethodPost, res: res})
		return res, true, nil
	}
	id := core.NewRequestID()
	octx := core.WithOperator(ctx, req.Who, id)
	a, perr := pollOperation(u, octx, l)
	if perr != nil {
		pe := osb.AsError(perr)
		res = ReconcileResult{Outcome: OutcomePollFailed, Answer: fmt.Sprintf("%d: %s", pe.Status, pe.Description)}
		err = &osb.Error{Status: http.StatusBadGateway, Err: perr,
			Description: "the broker's last_operation could not be polled (" + pe.Description + "); the record stays unknown: try again later"}
	} else {
		res = ReconcileResult{Status: a.Status, State: a.State, Description: a.Description, Answer: describeAnswer(a)}
		switch {
		case a.Ends(rules.LockedBy(op.Kind)):
			g.Inv.Polled(octx, s, l, a)
			res.Outcome = outcomeOf(a.State)
		case a.State == rules.PollInProgress:
			res.Outcome = OutcomeInProgress
		case a.State == rules.PollGone:
			res.Outcome = OutcomeNotEnded
		default:
			res.Outcome = OutcomeUnreadable
		}
	}
	g.ownRecord(ctx, ownAction{action: "reconcile", who: req.Who, requestID: id, lock: l, start: now, method: http.MethodGet, res: res, err: err})
	return res, true, err
}

// releasedRecord reads the record of req's instance (or binding) and
// reports whether its last operation is one an operator released.
func (g *Guard) releasedRecord(ctx context.Context, u *upstream.Upstream, req ReconcileRequest) (op store.LastOperation, tenant, service, plan string, ok bool) {
	st := g.Inv.St
	if req.BindingID != "" {
		b, err := st.GetBinding(ctx, u.Name, req.InstanceID, req.BindingID)
		return b.LastOperation, b.Tenant, b.ServiceID, b.PlanID, err == nil && b.LastOperation.State == store.StateUnknown
	}
	in, err := st.GetInstance(ctx, u.Name, req.InstanceID)
	return in.LastOperation, in.Tenant, in.ServiceID, in.PlanID, err == nil && in.LastOperation.State == store.StateUnknown
}
