package guard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// What a release leaves in the inventory. An operator who releases a lock
// says "stop waiting", not "it succeeded" or "it failed": the broker may
// or may not have done what was asked. The record of the instance (or
// binding) the lock was on gets the operation with state unknown, so the
// inventory no longer says "in progress", the usage report leaves a
// provision or bind of unknown outcome out (as it does a failed one), and
// the console and the admin API show who released it and why. A
// reconcile of the instance (or binding) polls the broker's
// last_operation with the operation the lock held and settles the
// record (reconcile_released.go); the platform's next call does too.

// markReleasedHeld marks the record of the released lock l (markReleased)
// under a lock of the gateway's own on l's key, taken at once: a
// platform's call that took the key first (its own operation, just after
// the release) owns the record and records its own outcome, so the mark
// is left out rather than written over it. A store that does not answer
// leaves the record as it was (a reconcile settles it).
func (g *Guard) markReleasedHeld(ctx context.Context, l store.Lock, who, reason string) {
	hold := l
	hold.Owner, hold.Deadline = core.NewRequestID(), g.Now().Add(ReleaseTimeout)
	held, err := g.St.Acquire(context.WithoutCancel(ctx), hold)
	if err != nil {
		g.Log.LogAttrs(ctx, slog.LevelWarn, "released operation's record not marked", slog.String("broker", l.Broker),
			slog.String("instance_id", l.InstanceID), slog.String("binding_id", l.BindingID), slog.String("error", err.Error()))
		return
	}
	defer g.Release(context.WithoutCancel(ctx), held)
	g.markReleased(ctx, l, who, reason)
}

// markReleased records that the operation of the released lock l has an
// unknown outcome; a lock whose outcome is known (an operator's forced
// state, the async shim's ended call) gets that outcome, as the
// platform's poll would have recorded it. A record the store does not take is logged and counted
// by the inventory, never turned into a failed release: the lock is gone
// either way.
func (g *Guard) markReleased(ctx context.Context, l store.Lock, who, reason string) {
	iv := g.Inv
	if iv == nil || l.Kind == "" {
		return
	}
	if u := g.Upstreams[l.Broker]; u == nil || !iv.Keeps(u) {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), ReleaseTimeout)
	defer cancel()
	op := store.LastOperation{Kind: l.Kind, State: store.StateUnknown, Operation: l.Operation, Started: l.Started, Ended: iv.now(),
		Description: releasedDescription(who, reason)}
	if st := l.Shim.State; st == store.StateSucceeded || st == store.StateFailed {
		// The outcome is known (the async shim's broker call ended, or an
		// operator forced it): record it, as the platform's poll would have.
		u := g.Upstreams[l.Broker]
		s := &core.Scope{Tenant: l.Tenant, Broker: u.Name, Call: rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID},
			Route: upstream.Route(u)}
		iv.Polled(ctx, s, l, rules.Answer{Status: http.StatusOK, Object: true, State: st, Description: l.Shim.Description})
		return
	}
	var err error
	if l.BindingID != "" {
		err = g.markBindingReleased(ctx, iv, l, op)
	} else {
		err = g.markInstanceReleased(ctx, iv, l, op)
	}
	iv.failed(ctx, l.Broker, rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID}, err)
}

// releasedDescription is the LastOperation.Description of a released
// operation.
func releasedDescription(who, reason string) string {
	d := fmt.Sprintf("released by %s (%s); the broker's outcome is unknown until a reconcile polls it", who, reason)
	if len(d) > core.MaxOperationLen {
		d = d[:core.MaxOperationLen]
	}
	return d
}

func (g *Guard) markInstanceReleased(ctx context.Context, iv *Inventory, l store.Lock, op store.LastOperation) error {
	in, err := iv.St.GetInstance(ctx, l.Broker, l.InstanceID)
	switch {
	case errors.Is(err, store.ErrNotFound) && l.Kind != store.KindProvision:
		return nil // nothing recorded to mark: an update or deprovision of an instance the gateway never saw
	case errors.Is(err, store.ErrNotFound): // a synchronous provision in flight: the broker may hold it
		in = store.Instance{Broker: l.Broker, InstanceID: l.InstanceID, Tenant: l.Tenant, ServiceID: l.ServiceID, PlanID: l.PlanID}
	case err != nil:
		return err
	}
	in.LastOperation, in.Updated = op, time.Time{}
	_, err = iv.St.PutInstance(ctx, in)
	return err
}

func (g *Guard) markBindingReleased(ctx context.Context, iv *Inventory, l store.Lock, op store.LastOperation) error {
	b, err := iv.St.GetBinding(ctx, l.Broker, l.InstanceID, l.BindingID)
	switch {
	case errors.Is(err, store.ErrNotFound) && l.Kind != store.KindBind:
		return nil
	case errors.Is(err, store.ErrNotFound):
		b = store.Binding{Broker: l.Broker, InstanceID: l.InstanceID, BindingID: l.BindingID, Tenant: l.Tenant, ServiceID: l.ServiceID, PlanID: l.PlanID}
	case err != nil:
		return err
	}
	b.LastOperation, b.Updated = op, time.Time{}
	_, err = iv.St.PutBinding(ctx, b)
	return err
}
