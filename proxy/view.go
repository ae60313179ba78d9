package proxy

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
)

// View is the narrow view of the running gateway that the operator surface
// works on — package admin (the JSON admin API) and package console (the
// status pages) reach the gateway through it and nothing else: routes,
// brokers, catalogs and their drift, locks, orphans and the inventory,
// read from the current Gateway of a Switch at each call (a reload shows
// at once), and the actions an operator takes on them (refresh a catalog,
// accept a drifted one, release or reconcile a lock, retry an orphan's
// mitigation). Nothing it returns holds a secret: no credentials, no
// sealed bytes, no broker password. Safe for concurrent use.
type View struct{ sw *Switch }

// NewView returns the view of the gateways sw serves.
func NewView(sw *Switch) *View { return &View{sw: sw} }

// Now is the gateway's clock (Options.Now).
func (v *View) Now() time.Time { return v.sw.Load().guard.Now() }

// RouteInfo is one route: a tenant's URL prefix and the broker behind it,
// the broker it migrates new instances to (routes[].migrate_to; empty:
// none), and the namespace of the ids it shows (routes[].ids; empty: the
// broker's own).
type RouteInfo struct {
	Tenant, Prefix, Broker  string
	MigrateTo, IDsNamespace string
}

// Routes returns every route, by tenant then prefix.
func (v *View) Routes() []RouteInfo {
	cfg := v.sw.Load().cfg
	var out []RouteInfo
	for _, t := range cfg.Tenants {
		for _, r := range t.Routes {
			p := r.Prefix
			if p == "" {
				p = "/" + t.Name + "/" + r.Broker
			}
			ri := RouteInfo{Tenant: t.Name, Prefix: p, Broker: r.Broker, MigrateTo: r.MigrateTo}
			if r.IDs != nil {
				ri.IDsNamespace = r.IDs.Namespace
			}
			out = append(out, ri)
		}
	}
	slices.SortFunc(out, func(a, b RouteInfo) int {
		return strings.Compare(a.Tenant+"\x00"+a.Prefix, b.Tenant+"\x00"+b.Prefix)
	})
	return out
}

// BrokerInfo is one broker's state as the gateway sees it.
type BrokerInfo struct {
	Name, URL, APIVersions string
	// Breaker is the circuit breaker's state (closed, half_open, open);
	// "" without a breaker.
	Breaker string
	// InFlight and Queued are the calls holding and awaiting a slot under
	// max_in_flight; -1 without a cap.
	InFlight, Queued int
	// CatalogFetched is the last successful catalog fetch (zero: none
	// yet); CatalogError the last fetch's error ("" after a success).
	CatalogFetched time.Time
	CatalogError   string
	// Catalogs is how many catalogs (by API version and platform) are
	// cached; CatalogHits, CatalogMisses and StaleServes the cache's
	// counters.
	Catalogs                                int
	CatalogHits, CatalogMisses, StaleServes int64
	// CatalogNextFetch is, while a failed fetch is remembered, the
	// earliest time the gateway fetches one of the broker's catalogs
	// again on its own (zero otherwise).
	CatalogNextFetch time.Time
	// Cached are the cached catalogs, by version.
	Cached []CachedCatalog
	// MaxInFlight is brokers[].max_in_flight (0: no cap) and QueueTimeout
	// its queue_timeout.
	MaxInFlight  int
	QueueTimeout time.Duration
	// BreakerInfo is the circuit breaker in full; nil without one.
	BreakerInfo *BreakerInfo
}

// CachedCatalog is one cached catalog of a broker.
type CachedCatalog struct {
	// Version and Platform are what it was fetched for (Platform "" for
	// every platform).
	Version, Platform string
	// Bytes is the size of its body, Age the time since it was fetched
	// and Fresh whether it is younger than its TTL, both at the time
	// Brokers was called.
	Bytes int
	Age   time.Duration
	Fresh bool
	// ETag and LastModified are the validators the gateway answers with.
	ETag         string
	LastModified time.Time
}

// Up reports whether the broker is taken to be up: its breaker is not
// open and its latest catalog fetch did not fail.
func (b BrokerInfo) Up() bool { return b.Breaker != "open" && b.CatalogError == "" }

// Brokers returns every configured broker, in configuration order.
func (v *View) Brokers() []BrokerInfo {
	g := v.sw.Load()
	out := make([]BrokerInfo, 0, len(g.cfg.Brokers))
	for _, b := range g.cfg.Brokers {
		out = append(out, g.brokerInfo(g.upstreams[b.Name]))
	}
	return out
}

// Operation is a lock: a call in flight or an asynchronous operation.
type Operation struct {
	Key, Kind, Tenant, Broker, InstanceID, BindingID, ServiceID, PlanID string
	// Async is set once the broker answered 202; OperationID is its
	// operation string (the gateway's for an emulated operation).
	Async       bool
	OperationID string
	// Shim is the state of the operation the gateway emulates for a
	// synchronous broker ("" when there is none).
	Shim              string
	Started, Deadline time.Time
}

// Operations returns the locks, filtered by broker and tenant when set,
// oldest first.
func (v *View) Operations(ctx context.Context, broker, tenant string) ([]Operation, error) {
	return v.operations(ctx, store.ListFilter{Broker: broker, Tenant: tenant})
}

// operations returns the locks f selects as Operations, oldest first.
func (v *View) operations(ctx context.Context, f store.ListFilter) ([]Operation, error) {
	locks, err := v.sw.Load().guard.St.List(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]Operation, 0, len(locks))
	for _, l := range locks {
		out = append(out, viewOperation(l))
	}
	slices.SortFunc(out, func(a, b Operation) int { return a.Started.Compare(b.Started) })
	return out, nil
}

// Release force-releases the lock of an instance (binding ""), or of one
// of its bindings, as DELETE /admin/operations does: one audit record
// names who and why (Gateway.ReleaseOperation). It returns the released
// operation; errors are *osb.Error (404: no such lock).
func (v *View) Release(ctx context.Context, broker, instance, binding, who, reason string) (Operation, error) {
	l, err := v.ReleaseLock(ctx, broker, instance, binding, who, reason)
	if err != nil {
		return Operation{}, err
	}
	return viewOperation(l), nil
}

// viewOperation is the View's summary of the lock l.
func viewOperation(l store.Lock) Operation {
	return Operation{Key: l.Key, Kind: l.Kind, Tenant: l.Tenant, Broker: l.Broker, InstanceID: l.InstanceID, BindingID: l.BindingID,
		ServiceID: l.ServiceID, PlanID: l.PlanID, Async: l.Async, OperationID: l.Operation, Shim: l.Shim.State,
		Started: l.Started, Deadline: l.Deadline}
}

// Reconcile polls the broker for one operation's state and settles its
// lock by the answer, or forces a final state (Gateway.Reconcile).
func (v *View) Reconcile(ctx context.Context, req guard.ReconcileRequest) (guard.ReconcileResult, error) {
	return v.sw.Load().Reconcile(ctx, req)
}

// OrphanInfo is an orphan candidate: something a broker may hold that no
// platform does.
type OrphanInfo struct {
	ID, Broker, Tenant, Kind, InstanceID, BindingID, Reason, LastError string
	Attempts                                                           int
	Created, NextAttempt                                               time.Time
	// Queued: the gateway will undo it (orphan_mitigation: mitigate);
	// otherwise it is only reported.
	Queued bool
}

// Orphans returns the orphan candidates, oldest first.
func (v *View) Orphans(ctx context.Context) ([]OrphanInfo, error) {
	g := v.sw.Load()
	os, err := g.guard.St.ListOrphans(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]OrphanInfo, 0, len(os))
	for _, o := range os {
		out = append(out, OrphanInfo{ID: o.ID, Broker: o.Broker, Tenant: o.Tenant, Kind: o.Kind, InstanceID: o.InstanceID,
			BindingID: o.BindingID, Reason: o.Reason, LastError: o.LastError, Attempts: o.Attempts, Created: o.Created,
			NextAttempt: o.NextAttempt, Queued: !o.NextAttempt.Equal(guard.NeverDue)})
	}
	slices.SortFunc(out, func(a, b OrphanInfo) int { return a.Created.Compare(b.Created) })
	return out, nil
}

// InstanceQuery selects instances of the inventory. Every set field must
// match; Broker and Tenant are served by the store's indexes, Service,
// Plan and ID (a prefix of the instance id) by a scan of at most Scan
// records (0: 10,000).
type InstanceQuery struct {
	Tenant, Broker, Service, Plan, ID string
	// Limit is how many to return at most (0: 100).
	Limit, Scan int
}

// InstanceInfo is an instance of the inventory, without its sealed
// parameters.
type InstanceInfo struct {
	Broker, InstanceID, Tenant, ServiceID, PlanID, State, LastKind string
	Bindings                                                       int
	Created, Updated                                               time.Time
	// OrganizationGUID and SpaceGUID are the provision's; Names what its
	// context calls it (view_instance.go).
	OrganizationGUID, SpaceGUID string
	Names                       PlatformNames
}

// Instances searches the inventory (see InstanceQuery). Scanned reports
// how many records were read, Truncated whether the scan stopped before
// the end of the inventory.
func (v *View) Instances(ctx context.Context, q InstanceQuery) (found []InstanceInfo, scanned int, truncated bool, err error) {
	g := v.sw.Load()
	limit, scan := q.Limit, q.Scan
	if limit <= 0 {
		limit = 100
	}
	if scan <= 0 {
		scan = 10000
	}
	f := store.InstanceFilter{Broker: q.Broker, Tenant: q.Tenant}
	cursor := ""
	for {
		page, next, err := g.guard.St.ListInstances(ctx, f, cursor, store.MaxListLimit)
		if err != nil {
			return nil, scanned, false, fmt.Errorf("listing the inventory: %w", err)
		}
		for _, in := range page {
			scanned++
			if (q.Service != "" && in.ServiceID != q.Service) || (q.Plan != "" && in.PlanID != q.Plan) ||
				(q.ID != "" && !strings.HasPrefix(in.InstanceID, q.ID)) {
				continue
			}
			info := InstanceInfo{Broker: in.Broker, InstanceID: in.InstanceID, Tenant: in.Tenant, ServiceID: in.ServiceID,
				PlanID: in.PlanID, State: in.LastOperation.State, LastKind: in.LastOperation.Kind, Created: in.Created, Updated: in.Updated,
				OrganizationGUID: in.OrganizationGUID, SpaceGUID: in.SpaceGUID, Names: NamesOf(in.Context)}
			if bs, err := g.guard.St.ListBindings(ctx, in.Broker, in.InstanceID); err == nil {
				info.Bindings = len(bs)
			}
			found = append(found, info)
			if len(found) >= limit {
				return found, scanned, next != "", nil
			}
		}
		if next == "" {
			return found, scanned, false, nil
		}
		if scanned >= scan {
			return found, scanned, true, nil
		}
		cursor = next
	}
}

// AdminToken checks got against admin.token in constant time; configured
// is false while no admin.token is set (then nothing matches).
func (v *View) AdminToken(got string) (ok, configured bool) {
	want := v.sw.Load().cfg.Admin.Token.Reveal()
	if want == "" {
		return false, false
	}
	return tokenOK(want, got), true
}

// AdminTokenHash is the SHA-256 of admin.token, for a session to check
// that the token it was opened with is still the one configured (a
// rotation ends it); ok is false while none is set.
func (v *View) AdminTokenHash() (hash [sha256.Size]byte, ok bool) {
	want := v.sw.Load().cfg.Admin.Token.Reveal()
	if want == "" {
		return hash, false
	}
	return sha256.Sum256([]byte(want)), true
}

// CatalogDrift returns each broker's catalog drift (Gateway.CatalogDrift).
func (v *View) CatalogDrift(ctx context.Context) ([]catalog.DriftReport, error) {
	return v.sw.Load().CatalogDrift(ctx)
}

// AcceptCatalog makes a broker's latest catalog the accepted one
// (Gateway.AcceptCatalog).
func (v *View) AcceptCatalog(ctx context.Context, broker, who string) error {
	return v.sw.Load().AcceptCatalog(ctx, broker, who)
}

// Usage reports instance-hours and binding counts over a period
// (Gateway.Usage).
func (v *View) Usage(ctx context.Context, q UsageQuery) (UsageReport, error) {
	return v.sw.Load().Usage(ctx, q)
}

// LiveInstancesSeries counts the live instances per plan at each step of a
// period (Gateway.LiveInstancesSeries).
func (v *View) LiveInstancesSeries(ctx context.Context, q UsageQuery, step time.Duration) ([]UsagePoint, error) {
	return v.sw.Load().LiveInstancesSeries(ctx, q, step)
}

// CatalogNames maps the service and plan ids of the cached catalogs to
// their names ("service" and "service/plan"), for pages that show ids
// people would rather read as names; an id of no cached catalog is not in
// it.
func (v *View) CatalogNames() map[string]string {
	c := v.sw.Load().catalogs
	out := map[string]string{}
	for _, k := range c.Entries.Keys() {
		e, ok := c.Entries.Peek(k)
		if !ok || e.Rules == nil {
			continue
		}
		for _, s := range e.Rules.Catalog().Services {
			out[s.ID] = s.Name
			for _, p := range s.Plans {
				out[p.ID] = s.Name + "/" + p.Name
			}
		}
	}
	return out
}

// tokenOK compares got with want in constant time (hashed first, so the
// time does not depend on the lengths either).
func tokenOK(want, got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
