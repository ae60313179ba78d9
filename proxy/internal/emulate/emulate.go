package emulate

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// What the emulation stage answered in the broker's place (Scope.Emulated).
const (
	EmulatedFetch  = "fetch"  // GET instance or binding from the inventory
	EmulatedReplay = "replay" // a repeat of a call that succeeded (emulate.idempotent)
	EmulatedGone   = "gone"   // a delete of what the inventory never saw (emulate.gone)
)

// versionFetch is the version that brought GET instance and GET binding.
var versionFetch = osb.Version{Major: 2, Minor: 14}

// WithEmulate is the emulation stage, after the guard (a mutating call
// holds its lock here, so what the stage reads of the inventory is what
// the broker holds, and the guard releases the lock of a call answered
// here) and before the upstream. For a broker with the emulations on
// (brokers[].emulate) it answers from the inventory what the broker cannot:
//
//   - fetch: GET instance and GET binding (see fetchEmulated);
//   - idempotent: a provision or bind that repeats one that succeeded gets
//     200 and the recorded answer, a conflicting one 409 (see replay);
//   - gone: a deprovision or unbind of what the inventory never saw gets
//     410 Gone.
//
// Every other call, and every call to a broker without them, passes on.
func WithEmulate(cache *catalog.Cache) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			u := upstream.Of(s.Route)
			if !u.Emulates() || !guard.Of(s).Inv.Keeps(u) {
				next.ServeHTTP(w, r)
				return
			}
			e := emulation{s: s, iv: guard.Of(s).Inv, u: u, ctx: r.Context()}
			var done bool
			switch s.Call.Endpoint {
			case rules.GetInstance, rules.GetBinding:
				done = u.Cfg.Emulate.Fetch && e.fetch(w, r, cache)
			case rules.Provision, rules.Bind:
				done = u.Cfg.Emulate.Idempotent && e.replay(w)
			case rules.Deprovision, rules.Unbind:
				done = u.Cfg.Emulate.Gone && e.gone(w)
			}
			if !done {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// emulation is one call the stage looks at.
type emulation struct {
	s   *core.Scope
	iv  *guard.Inventory
	u   *upstream.Upstream
	ctx context.Context
}

// fetch answers GET instance or GET binding from the inventory when the
// broker cannot: below 2.14, or its catalog says the service's
// instances_retrievable (bindings_retrievable) is false (see
// brokerFetches). A broker that can gets the call. What the gateway never
// saw succeed, or saw deleted, is 404 and never reaches a broker that
// cannot answer for it: such a broker's answer would be a guess (some
// answer 200 with what they held before the deprovision). It reports
// whether it answered.
func (e emulation) fetch(w http.ResponseWriter, r *http.Request, cache *catalog.Cache) bool {
	c := e.s.Call
	in, err := e.iv.St.GetInstance(e.ctx, e.u.Name, c.InstanceID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		e.unavailable(w, err)
		return true
	}
	found := err == nil
	if !e.u.Max.Less(versionFetch) && e.brokerFetches(r, cache, in, found) {
		return false
	}
	e.s.Emulated = EmulatedFetch
	if c.Endpoint == rules.GetInstance {
		if !found || !exists(in.LastOperation, store.KindProvision) {
			e.s.Fail(w, osb.Errorf(http.StatusNotFound, "", "the gateway never saw service instance %q provisioned at broker %q, or saw it deprovisioned "+
				"(or its provision is in progress or failed); it answers GET instance for this broker, which cannot, from what it saw succeed", c.InstanceID, e.u.Name))
			return true
		}
		if in.LastOperation.Kind == store.KindUpdate && in.LastOperation.State == store.StateInProgress {
			e.s.Fail(w, osb.Errorf(http.StatusUnprocessableEntity, osb.CodeConcurrencyError, "service instance %q is being updated; fetch it when the update has finished", c.InstanceID))
			return true
		}
		out := instanceBody(in, e.iv.Open(e.ctx, in.SealedParameters, "parameters", in.Broker, in.InstanceID, ""), e.s.Version)
		if x, ok := e.s.Route.IDs.(fetchedForwarder); ok {
			x.ForwardFetched(out) // routes[].ids (proxy/internal/routes/routeids.go)
		}
		core.WriteAnswer(w, http.StatusOK, out)
		return true
	}
	// A binding recorded without its instance is one made on an instance
	// the gateway never recorded (provisioned before it kept an inventory).
	b, err := e.iv.St.GetBinding(e.ctx, e.u.Name, c.InstanceID, c.BindingID)
	switch {
	case err != nil && !errors.Is(err, store.ErrNotFound):
		e.unavailable(w, err)
	case err != nil || !exists(b.LastOperation, store.KindBind) || (found && !exists(in.LastOperation, store.KindProvision)):
		e.s.Fail(w, osb.Errorf(http.StatusNotFound, "", "the gateway never saw service binding %q of instance %q made at broker %q, or saw it unbound "+
			"(or its bind is in progress or failed); it answers GET binding for this broker, which cannot, from what it saw succeed", c.BindingID, c.InstanceID, e.u.Name))
	default:
		core.WriteAnswer(w, http.StatusOK, bindingBody(b, e.iv.Open(e.ctx, b.SealedParameters, "parameters", b.Broker, b.InstanceID, b.BindingID),
			e.iv.Open(e.ctx, b.SealedCredentials, "credentials", b.Broker, b.InstanceID, b.BindingID), e.s.Version))
	}
	return true
}

// brokerFetches reports whether a broker of 2.14 or later answers the
// fetch itself: its catalog says the service is retrievable
// (rules.Index.Retrievable) — the recorded instance's service, else the
// service_id of the query, else, for an instance the gateway never saw
// (or saw deprovisioned), any service of the catalog. A catalog that
// cannot be read leaves the call to the broker.
func (e emulation) brokerFetches(r *http.Request, cache *catalog.Cache, in store.Instance, found bool) bool {
	ce, _, err := cache.Get(r.Context(), catalog.FetchFor(r, e.s))
	if err != nil {
		return true // cannot tell: the broker answers for itself
	}
	serviceID := e.s.Call.ServiceID
	if found && in.ServiceID != "" {
		serviceID = in.ServiceID
	}
	return ce.Rules.Retrievable(e.s.Call.Endpoint, serviceID)
}

// exists reports whether a record whose last operation is op stands for a
// resource the broker holds: anything but a create (create: provision or
// bind) that is still in progress or failed.
func exists(op store.LastOperation, create string) bool {
	return op.Kind != create || op.State == store.StateSucceeded
}

// unavailable answers 503 when the inventory cannot be read.
func (e emulation) unavailable(w http.ResponseWriter, err error) {
	e.iv.Metrics.StoreError("inventory")
	e.iv.Log.LogAttrs(e.ctx, slog.LevelError, "inventory unavailable", slog.String("broker", e.u.Name), slog.String("error", err.Error()))
	e.s.Fail(w, &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: "the gateway's inventory is unavailable, so it cannot answer for broker " + strconv.Quote(e.u.Name) + "; try again later"})
}

// Versions that brought fields of fetched answers.
var (
	versionMaintenanceInfo = osb.Version{Major: 2, Minor: 15}
	versionMetadata        = osb.Version{Major: 2, Minor: 16}
)

// instanceBody is a GET instance answer for the platform's version v.
func instanceBody(in store.Instance, params json.RawMessage, v osb.Version) map[string]any {
	out := map[string]any{"service_id": in.ServiceID, "plan_id": in.PlanID}
	if in.DashboardURL != "" {
		out["dashboard_url"] = in.DashboardURL
	}
	if params != nil {
		out["parameters"] = params
	}
	if in.MaintenanceInfo != nil && !v.Less(versionMaintenanceInfo) {
		out["maintenance_info"] = in.MaintenanceInfo
	}
	if in.Metadata != nil && !v.Less(versionMetadata) {
		out["metadata"] = in.Metadata
	}
	return out
}

// bindingBody is a GET binding answer (and a replayed bind's) for the
// platform's version v.
func bindingBody(b store.Binding, params, creds json.RawMessage, v osb.Version) map[string]any {
	out := map[string]any{}
	if creds != nil {
		out["credentials"] = creds
	}
	if params != nil {
		out["parameters"] = params
	}
	if b.SyslogDrainURL != "" {
		out["syslog_drain_url"] = b.SyslogDrainURL
	}
	if b.RouteServiceURL != "" {
		out["route_service_url"] = b.RouteServiceURL
	}
	if b.VolumeMounts != nil {
		out["volume_mounts"] = b.VolumeMounts
	}
	if b.Endpoints != nil && !v.Less(versionMetadata) {
		out["endpoints"] = b.Endpoints
	}
	if md := bindingMetadata(b); md != nil && !v.Less(versionMetadata) {
		out["metadata"] = md
	}
	return out
}

// bindingMetadata is a binding's metadata object: expires_at and
// renew_before as the broker sent them.
func bindingMetadata(b store.Binding) map[string]string {
	if b.ExpiresAt.IsZero() {
		return nil
	}
	md := map[string]string{"expires_at": b.ExpiresAt.Format("2006-01-02T15:04:05.999Z07:00")}
	if !b.RenewBefore.IsZero() {
		md["renew_before"] = b.RenewBefore.Format("2006-01-02T15:04:05.999Z07:00")
	}
	return md
}

// fetchedForwarder rewrites what the gateway answers from its inventory
// for the platform: the ids a route shows (core.Route.IDs, routes[].ids).
type fetchedForwarder interface {
	ForwardFetched(out map[string]any)
}
