package upstream

import (
	"cmp"
	"context"
	"net/http"
	"reflect"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// WarmVersion is the version the gateway fetches a catalog at on its own
// (warm-up, refresh, check): rules.CloudControllerVersion capped at the
// broker's maximum.
func (u *Upstream) WarmVersion() osb.Version {
	if u.Max.Less(rules.CloudControllerVersion) {
		return u.Max
	}
	return rules.CloudControllerVersion
}

// Emulates reports whether any emulation of the stage is on for u.
func (u *Upstream) Emulates() bool {
	em := u.Cfg.Emulate
	return em.Fetch || em.Idempotent || em.Gone
}

// FetchClaimed reports whether the emulation stage may answer c for a
// broker whose version lacks it (the classify stage lets it through
// instead of answering 412).
func (u *Upstream) FetchClaimed(c rules.Call) bool {
	return u.Cfg.Emulate.Fetch && !u.Cfg.Inventory.Disabled &&
		(c.Endpoint == rules.GetInstance || c.Endpoint == rules.GetBinding)
}

// LockKey is the key a call on the instance (and binding) locks: the
// binding's own key under lock_granularity binding, else the instance's.
func (u *Upstream) LockKey(instanceID, bindingID string) string {
	if bindingID != "" && u.BindingLocks {
		return store.BindingLockKey(u.Name, instanceID, bindingID)
	}
	return store.LockKey(u.Name, instanceID)
}

// OwnRequest is a call the gateway makes to the broker on its own (an
// orphan's undo, a reconcile's poll): the broker's credentials, the highest
// version it takes and a request identity of its own, marked as the
// gateway's in its span (ownCall).
func (u *Upstream) OwnRequest(ctx context.Context, ep rules.Endpoint, traceParent, method, target string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(u.OwnCall(ctx, ep, traceParent), method, target, nil)
	if err != nil {
		return nil, err
	}
	if u.Auth != nil {
		req.Header["Authorization"] = u.Auth
	}
	req.Header[core.HeaderAPIVersion] = u.MaxHeader
	req.Header[core.HeaderRequestIdentity] = []string{cmp.Or(core.OwnRequestID(ctx), core.NewRequestID())} // a reconcile's own (withOperator)
	return req, nil
}

// SameBesidesRetired reports whether b differs from u's settings in
// brokers[].retired alone: a reload that retires a broker keeps its cached
// catalog, which the platforms are then served while the broker is down.
func (u *Upstream) SameBesidesRetired(b *config.Broker) bool {
	mine, theirs := u.Cfg, *b
	mine.Retired, theirs.Retired = config.Retired{}, config.Retired{}
	return reflect.DeepEqual(mine, theirs)
}

// ShimClaims reports whether the async shim may answer call for a broker
// whose version lacks it: a binding's last_operation to a broker with
// async_after set. The classify stage then holds its 412 back
// (Scope.shimTooOld), and servePoll answers the poll of an operation the
// shim owns, or refuses it with that 412.
func (u *Upstream) ShimClaims(c rules.Call) bool {
	return c.Endpoint == rules.BindingLastOperation && u.Cfg.Emulate.AsyncAfter > 0
}

// syncWaits reports whether the broker's answer a to s's call is the 422
// AsyncRequired that brokers[].emulate.sync_within serves: the platform
// sent no accepts_incomplete=true to a provision, update, deprovision, bind
// or unbind, and the call holds its lock.
func (u *Upstream) syncWaits(s *core.Scope, a rules.Answer) bool {
	return u.Cfg.Emulate.SyncWithin > 0 && s.Lock != nil && !s.Lock.Settled && rules.AsyncRequired(s.Call, a)
}

// LockedThing names what a call's lock blocks.
func (u *Upstream) LockedThing(c rules.Call) string {
	if c.BindingID != "" && u.BindingLocks {
		return "binding"
	}
	return "service instance"
}

// Wait waits d between two polls, or until ctx ends: with upstream.pause
// when a test set it.
func (u *Upstream) Wait(ctx context.Context, d time.Duration) error {
	if u.Pause != nil {
		return u.Pause(ctx, d)
	}
	return sleep(ctx, d)
}

// sleep waits d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Of is the upstream of route rt (core.Route.Up): the broker its calls
// reach.
func Of(rt *core.Route) *Upstream { u, _ := rt.Up.(*Upstream); return u }

// Route is a route to u without a tenant or prefix: the route of a call
// the gateway makes on its own (a poll, a reconcile), which the stages
// and callbacks read as a platform call's.
func Route(u *Upstream) *core.Route {
	return &core.Route{Up: u, Broker: &u.Cfg, MaxVersion: u.MaxString}
}
