package proxy

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// The View's records: what the admin API (package admin) shows in full.
// Locks and orphans are the state store's own records (package store);
// inventory records come without their sealed bytes. Errors from the
// state store are returned as the store gave them (store.ErrNotFound,
// store.ErrInvalid, or a backend's error), for the caller to describe.

// ErrNoBroker is the error of a View method given a broker name that the
// configuration in force does not have.
var ErrNoBroker = errors.New("no such broker in the configuration")

// brokerInfo describes the broker behind u.
func (g *Gateway) brokerInfo(u *upstream.Upstream) BrokerInfo {
	c := g.catalogs
	st := c.StatsFor(u.Name)
	b := BrokerInfo{Name: u.Name, URL: u.Target.String(), APIVersions: u.Min.String() + " to " + u.Max.String(),
		CatalogHits: st.Hits.Load(), CatalogMisses: st.Misses.Load(), StaleServes: st.Stale.Load(),
		Cached: []CachedCatalog{}, InFlight: -1, Queued: -1}
	st.Mu.Lock()
	b.CatalogFetched, b.CatalogError = st.LastFetch, st.LastError
	st.Mu.Unlock()
	now := c.Now()
	b.CatalogNextFetch = c.NextFetch(u.Name, now)
	for _, k := range c.Entries.Keys() {
		if k.Broker != u.Name {
			continue
		}
		if e, ok := c.Entries.Peek(k); ok {
			b.Cached = append(b.Cached, CachedCatalog{Version: k.Version, Platform: k.Platform, Bytes: len(e.Body),
				Age: now.Sub(e.Fetched), Fresh: now.Before(e.Expires), ETag: e.Etag[0], LastModified: e.LastModified})
		}
	}
	sort.Slice(b.Cached, func(i, j int) bool { return b.Cached[i].Version < b.Cached[j].Version })
	b.Catalogs = len(b.Cached)
	if p := g.brokerProtect[u.Name]; p != nil {
		if q := p.Queue; q != nil {
			b.InFlight, b.Queued = q.Counts()
			b.MaxInFlight, b.QueueTimeout = q.Max, q.Timeout
		}
		if p.Breaker != nil {
			b.BreakerInfo = p.Breaker.Status()
			b.Breaker = b.BreakerInfo.State
		}
	}
	return b
}

// RefreshCatalog fetches the broker's catalogs again now, whatever the
// backoff after failed fetches, and returns the broker as Brokers shows
// it and how many catalogs were fetched; ErrNoBroker for a name the
// configuration does not have, else the fetch's error.
func (v *View) RefreshCatalog(ctx context.Context, broker string) (BrokerInfo, int, error) {
	g := v.sw.Load()
	u := g.upstreams[broker]
	if u == nil {
		return BrokerInfo{}, 0, ErrNoBroker
	}
	entries, err := g.catalogs.Refresh(ctx, u, u.WarmVersion().String())
	if err != nil {
		return BrokerInfo{}, 0, err
	}
	return g.brokerInfo(u), len(entries), nil
}

// LockRecords returns the state store's lock records, filtered by broker
// and tenant when set, in the store's order: what Operations summarises.
func (v *View) LockRecords(ctx context.Context, broker, tenant string) ([]store.Lock, error) {
	return v.sw.Load().guard.St.List(ctx, store.ListFilter{Broker: broker, Tenant: tenant})
}

// ReleaseLock is Release returning the released lock's record.
func (v *View) ReleaseLock(ctx context.Context, broker, instance, binding, who, reason string) (store.Lock, error) {
	return v.sw.Load().guard.ReleaseLock(ctx, broker, instance, binding, who, reason)
}

// OrphanRecords returns the state store's orphan records (what Orphans
// summarises), in the store's order.
func (v *View) OrphanRecords(ctx context.Context) ([]store.Orphan, error) {
	return v.sw.Load().guard.St.ListOrphans(ctx)
}

// Orphan returns one orphan record (store.ErrNotFound: none with that id).
func (v *View) Orphan(ctx context.Context, id string) (store.Orphan, error) {
	return v.sw.Load().guard.St.GetOrphan(ctx, id)
}

// MitigateOrphan tries o's mitigation now, as the background worker
// would: claimed, under the lock, audited. Read the orphan back (Orphan)
// to learn the outcome: gone once mitigated, else with its LastError.
func (v *View) MitigateOrphan(ctx context.Context, o store.Orphan) {
	v.sw.Load().guard.Mitigate(ctx, o)
}

// StoredInstance is an instance of the inventory without its sealed
// bytes: Record.SealedParameters is nil, ParametersStored says whether
// sealed parameters are kept.
type StoredInstance struct {
	Record           store.Instance
	ParametersStored bool
}

// StoredBinding is a binding of the inventory without its sealed bytes:
// Record.SealedParameters and Record.SealedCredentials are nil,
// ParametersStored and CredentialsStored say whether some are kept.
type StoredBinding struct {
	Record                              store.Binding
	ParametersStored, CredentialsStored bool
}

func storedInstance(in store.Instance) StoredInstance {
	s := StoredInstance{Record: in, ParametersStored: len(in.SealedParameters) > 0}
	s.Record.SealedParameters = nil
	return s
}

func storedBinding(b store.Binding) StoredBinding {
	s := StoredBinding{Record: b, ParametersStored: len(b.SealedParameters) > 0, CredentialsStored: len(b.SealedCredentials) > 0}
	s.Record.SealedParameters, s.Record.SealedCredentials = nil, nil
	return s
}

func storedBindings(bs []store.Binding) []StoredBinding {
	out := make([]StoredBinding, 0, len(bs))
	for _, b := range bs {
		out = append(out, storedBinding(b))
	}
	return out
}

// ListInstances returns a page of at most limit instances of the
// inventory (0: the store's default) matching f, after cursor (the next
// cursor of an earlier page; "" for the first), and the next cursor (""
// after the last page).
func (v *View) ListInstances(ctx context.Context, f store.InstanceFilter, cursor string, limit int) ([]StoredInstance, string, error) {
	page, next, err := v.sw.Load().guard.St.ListInstances(ctx, f, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	out := make([]StoredInstance, 0, len(page))
	for _, in := range page {
		out = append(out, storedInstance(in))
	}
	return out, next, nil
}

// CountInstances returns how many instances of the inventory match f.
func (v *View) CountInstances(ctx context.Context, f store.InstanceFilter) (int, error) {
	return v.sw.Load().guard.St.CountInstances(ctx, f)
}

// GetInstance returns one instance of the inventory (store.ErrNotFound:
// not recorded).
func (v *View) GetInstance(ctx context.Context, broker, instance string) (StoredInstance, error) {
	in, err := v.sw.Load().guard.St.GetInstance(ctx, broker, instance)
	if err != nil {
		return StoredInstance{}, err
	}
	return storedInstance(in), nil
}

// ListBindings returns the bindings of one instance in the inventory,
// recorded or not.
func (v *View) ListBindings(ctx context.Context, broker, instance string) ([]StoredBinding, error) {
	bs, err := v.sw.Load().guard.St.ListBindings(ctx, broker, instance)
	if err != nil {
		return nil, err
	}
	return storedBindings(bs), nil
}

// ExpiringBindings returns at most limit bindings (0: the store's
// default) whose expires_at is before before, of broker (""; every
// broker), soonest first.
func (v *View) ExpiringBindings(ctx context.Context, broker string, before time.Time, limit int) ([]StoredBinding, error) {
	bs, err := v.sw.Load().guard.St.ExpiringBindings(ctx, broker, before, limit)
	if err != nil {
		return nil, err
	}
	return storedBindings(bs), nil
}

// CountExpiring returns, per broker, how many bindings have an
// expires_at before before (brokers no longer configured included).
func (v *View) CountExpiring(ctx context.Context, before time.Time) (map[string]int, error) {
	return v.sw.Load().guard.St.CountExpiring(ctx, before)
}

// ExpiryWarning is inventory.expiry_warning: how far ahead a binding's
// expires_at counts as expiring.
func (v *View) ExpiryWarning() time.Duration { return v.sw.Load().cfg.Inventory.ExpiryWarning }

// Pprof reports whether the configuration in force sets admin.pprof: the
// runtime profiles may be served.
func (v *View) Pprof() bool { return v.sw.Load().cfg.Admin.Pprof }
