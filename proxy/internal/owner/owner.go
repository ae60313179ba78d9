// Package owner is the owner stage: on a broker several tenants reach, a
// service instance belongs to the tenant whose platform created it, and a
// call of another tenant on it gets the answer a broker gives for an
// instance it does not hold, without reaching the broker
// (docs/security.md#tenants-and-their-instances). It imports the core and
// the metrics service, and no other stage.
package owner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/rules"
)

// ProtectionOwner is the Scope.Protection of a call refused because its
// instance belongs to another tenant (WithOwner).
const ProtectionOwner = "owner"

// Owners keeps tenants apart on the brokers several of them reach: a
// service instance belongs to the tenant whose platform created it, as the
// inventory records (store.Instance.Tenant; a binding recorded without its
// instance, store.Binding.Tenant), and a call of another tenant on it gets
// rules.NotOwned without reaching the broker.
//
// What the inventory does not know (an instance made before it was kept,
// or whose record has no tenant) belongs to nobody yet: its calls pass, and
// the first success a tenant's call on it records makes it that tenant's
// (adoption; inventory.updateInstance). `osb-gateway inventory import`
// with a tenant on each line gives such instances their owners at once.
type owners struct {
	// shared names the brokers reached by routes of more than one tenant
	// (a route's broker or its migrate_to); only their calls are checked.
	shared map[string]bool
	st     store.Store
	log    *slog.Logger
	m      *metrics.Metrics
}

// New returns the owners of cfg's shared brokers, or nil when every
// broker is reached by one tenant at most (nothing to keep apart).
func New(cfg *config.Config, st store.Store, log *slog.Logger, m *metrics.Metrics) *owners {
	o := &owners{shared: map[string]bool{}, st: st, log: log, m: m}
	for _, b := range cfg.Brokers {
		if len(cfg.TenantsReaching(b.Name)) > 1 {
			o.shared[b.Name] = true
		}
	}
	if len(o.shared) == 0 {
		return nil
	}
	return o
}

// WithOwner is the owner stage, after classify (which chose the broker
// of a migrating route) and before anything that costs the owner: a
// refused call takes no quota, no broker slot and no lock, so another
// tenant cannot hold the owner's instance busy. On a shared broker
// (owners.shared) whose inventory is kept, a call naming an instance:
//
//   - of another tenant (its record's, or for a binding recorded without
//     its instance the binding's): rules.NotOwned, the broker not called;
//   - of nobody the inventory knows: a read (GET, last_operation) also
//     asks the instance's lock, so that an operation of another tenant in
//     flight (a provision not yet recorded) keeps it; a mutating call is
//     looked at again under its own lock (WithOwnerHeld), where the
//     inventory is what the broker holds;
//   - whose owner cannot be read (the state store does not answer): 503,
//     reads too: a guess could hand one tenant another's credentials.
//
// nil without shared brokers.
func WithOwner(o *owners) core.Middleware {
	if o == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			c := s.Call
			b := s.Route.Broker
			if c.InstanceID == "" || !o.shared[b.Name] || b.Inventory.Disabled {
				next.ServeHTTP(w, r)
				return
			}
			_, mutating := rules.LockKind(c.Endpoint)
			owner, err := o.ownerOf(r.Context(), b.Name, c, !mutating)
			switch {
			case err != nil:
				o.unavailable(w, r, s, err)
				return
			case owner != "" && owner != s.Tenant:
				o.refuse(w, s, owner)
				return
			case owner == "" && mutating:
				s.OwnerUnseen = true
			}
			next.ServeHTTP(w, r)
		})
	}
}

// WithOwnerHeld is the owner stage's second look, just inside the guard:
// a mutating call whose instance had no owner when WithOwner looked holds
// its lock now, so an operation of another tenant that recorded the
// instance in between (a provision that ended) is seen. The guard read
// the instance's record in the round trip that took the lock
// (core.HeldLock.Read): the look reads that, and the store only for a
// binding's record. nil without shared brokers.
func WithOwnerHeld(o *owners) core.Middleware {
	if o == nil {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if !s.OwnerUnseen || s.Lock == nil {
				next.ServeHTTP(w, r)
				return
			}
			var owner string
			var err error
			switch rec := s.Lock.Instance; {
			case !s.Lock.Read:
				owner, err = o.ownerOf(r.Context(), s.Route.Broker.Name, s.Call, false)
			case rec != nil && rec.Tenant != "":
				owner = rec.Tenant
			default:
				owner, err = o.bindingOwner(r.Context(), s.Route.Broker.Name, s.Call, false)
			}
			switch {
			case err != nil:
				o.unavailable(w, r, s, err)
			case owner != "" && owner != s.Tenant:
				o.refuse(w, s, owner)
			default:
				next.ServeHTTP(w, r)
			}
		})
	}
}

// ownerOf is the tenant that owns c's instance at broker: the instance
// record's tenant, else (a binding call) the binding record's, else, with
// lock set, the tenant of the operation in progress on the instance; ""
// when nobody is known. Each look is one key: one read for an instance the
// inventory records, at most three otherwise.
func (o *owners) ownerOf(ctx context.Context, broker string, c rules.Call, lock bool) (string, error) {
	in, err := o.st.GetInstance(ctx, broker, c.InstanceID)
	switch {
	case err == nil && in.Tenant != "":
		return in.Tenant, nil
	case err != nil && !errors.Is(err, store.ErrNotFound):
		return "", err
	}
	return o.bindingOwner(ctx, broker, c, lock)
}

// bindingOwner is ownerOf past an instance record that names no tenant:
// the binding record's tenant, else (with lock) the tenant of the
// operation in progress.
func (o *owners) bindingOwner(ctx context.Context, broker string, c rules.Call, lock bool) (string, error) {
	if c.BindingID != "" {
		b, err := o.st.GetBinding(ctx, broker, c.InstanceID, c.BindingID)
		switch {
		case err == nil && b.Tenant != "":
			return b.Tenant, nil
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", err
		}
	}
	if !lock {
		return "", nil
	}
	l, err := o.st.Get(ctx, store.LockKey(broker, c.InstanceID))
	switch {
	case err == nil:
		return l.Tenant, nil
	case errors.Is(err, store.ErrNotFound):
		return "", nil
	}
	return "", err
}

// refuse answers a call on owner's instance; the owner goes to the access
// line and the audit record (the error's cause), never to the platform.
func (o *owners) refuse(w http.ResponseWriter, s *core.Scope, owner string) {
	s.Protection = ProtectionOwner
	o.m.OwnerRefused(s.Tenant, s.Broker)
	e := rules.NotOwned(s.Call, s.Version, s.Tenant, s.Broker)
	e.Err = fmt.Errorf("the instance belongs to tenant %q", owner)
	s.Fail(w, e)
}

// unavailable answers 503 when the owner cannot be read.
func (o *owners) unavailable(w http.ResponseWriter, r *http.Request, s *core.Scope, err error) {
	o.m.StoreError("owner")
	o.log.LogAttrs(r.Context(), slog.LevelError, "instance owner unavailable", slog.String("broker", s.Broker),
		slog.String("tenant", s.Tenant), slog.String("error", err.Error()))
	s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: "the gateway's inventory is unavailable, so it cannot tell whether tenant " + strconv.Quote(s.Tenant) +
			" holds this service instance at broker " + strconv.Quote(s.Broker) + " (which several tenants reach); try again later"})
}
