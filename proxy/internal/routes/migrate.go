package routes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Migration is a route's migrate_to: the route's new instances go to
// a second broker, instance by instance. The inventory says which broker
// holds an instance, and every call for it goes there: never split per
// request. The catalog the platform sees stays the old broker's, so the
// new broker must carry its service and plan ids (checkCatalogs).
type Migration struct {
	// old is the route as configured (its broker holds the instances made
	// before the migration); new is the same route (prefix, tenant, filter,
	// limits) with the new broker's upstream and protection.
	Old, New *core.Route
	Inv      store.Inventory
	Locks    store.Store
	log      *slog.Logger
	// checked is the last comparison of the two catalogs, kept until
	// either entry changes.
	checked atomic.Pointer[catalogCheck]
}

// catalogCheck is what the new broker's catalog lacks of the old one's,
// as the tenant sees it: "" when nothing.
type catalogCheck struct {
	old, new *catalog.Entry
	missing  string
}

// NewMigration makes rt migrate its new instances to u.
func NewMigration(rt *core.Route, u *upstream.Upstream, bp any, st store.Store, log *slog.Logger) *Migration {
	to := *rt
	to.Up, to.Broker, to.MaxVersion, to.BrokerProtect = u, &u.Cfg, u.MaxString, bp
	m := &Migration{Old: rt, New: &to, Inv: st, Locks: st, log: log}
	rt.Migration, to.Migration = m, m
	return m
}

// Migrate sends the call to the broker that holds its instance (owner)
// and, when that is the new broker, negotiates the platform's version
// again against the new broker's range. Calls without an instance (the
// catalog) stay with the old broker.
func (m *Migration) Migrate(r *http.Request, s *core.Scope, call rules.Call) error {
	if call.InstanceID == "" {
		return nil
	}
	to, err := m.Owner(r.Context(), call)
	if err != nil || to == m.Old {
		return err
	}
	n, forward, err := core.Negotiate(r, to)
	if err != nil {
		return err
	}
	s.Route, s.Broker = to, upstream.Of(to).Name
	s.Version, s.BrokerVersion, s.Forward = n.Platform, n.Broker, forward
	return nil
}

// Owner is the route of the broker that holds the call's instance:
//
//   - the one whose inventory records it (the new one first: an instance
//     imported under the new broker has moved there);
//   - else the one where the instance's lock is held (an operation in flight whose
//     success is not recorded yet: a provision, or the orphan mitigation
//     after it, must meet the operation it races);
//   - else the one whose orphan queue names it (a provision that failed
//     there in a way that may have left the instance: the platform's own
//     orphan-mitigation DELETE must reach that broker);
//   - else, for a provision, the new broker (an instance the gateway never
//     saw); for any other call, the old one (the instances made before the
//     migration may predate the inventory).
//
// Each look is one key (no scan): at most two inventory reads, two lock
// reads and two orphan reads, on migrating routes only. A store that
// cannot answer is a 503: guessing could create an instance twice, or
// tell the platform one is gone that is not.
func (m *Migration) Owner(ctx context.Context, call rules.Call) (*core.Route, error) {
	id := call.InstanceID
	looks := [...]func(broker string) error{
		func(b string) error { _, err := m.Inv.GetInstance(ctx, b, id); return err },
		func(b string) error { _, err := m.Locks.Get(ctx, store.LockKey(b, id)); return err },
		func(b string) error {
			_, err := m.Locks.GetOrphan(ctx, guard.OrphanID(store.KindDeprovision, b, id, ""))
			return err
		},
	}
	for _, look := range looks {
		for _, rt := range [2]*core.Route{m.New, m.Old} {
			switch err := look(upstream.Of(rt).Name); {
			case err == nil:
				return rt, nil
			case !errors.Is(err, store.ErrNotFound):
				return nil, m.unavailable(err)
			}
		}
	}
	if call.Endpoint == rules.Provision {
		return m.New, nil
	}
	return m.Old, nil
}

func (m *Migration) unavailable(err error) error {
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: fmt.Sprintf("the gateway's inventory is unavailable, so it cannot tell whether broker %q or %q (routes[].migrate_to) holds this instance; try again later",
			upstream.Of(m.Old).Name, upstream.Of(m.New).Name)}
}

// CheckCatalogs refuses a provision the migration sends to the new broker
// while the new broker's catalog lacks a service or plan id the tenant
// sees in the old broker's catalog (the platform's catalog is the old
// one's, so every id it shows must work at the new broker). A catalog the
// cache cannot give is left to the validation of the new one. The
// comparison is made once per pair of catalog versions.
func (m *Migration) CheckCatalogs(r *http.Request, s *core.Scope, cache *catalog.Cache) error {
	ne := catalog.Of(s) // the new broker's, when the validate stage fetched it
	if ne == nil {
		var err error
		if ne, _, err = cache.Get(r.Context(), catalog.FetchFor(r, s)); err != nil {
			return nil
		}
	}
	old := upstream.Of(m.Old)
	_, forward, err := core.Negotiate(r, m.Old) // the version the platform's catalog was fetched at
	if err != nil {
		return nil
	}
	oe, _, err := cache.Get(r.Context(), catalog.FetchOf(r, s, old, forward))
	if err != nil {
		return nil
	}
	c := m.checked.Load()
	if c == nil || c.old != oe || c.new != ne {
		c = &catalogCheck{old: oe, new: ne, missing: MissingIDs(catalog.FilterOf(m.Old), oe.Rules, ne.Rules)}
		if prev := m.checked.Swap(c); c.missing != "" && (prev == nil || prev.missing != c.missing) {
			m.log.LogAttrs(r.Context(), slog.LevelWarn, "migration refuses new instances: the new broker's catalog lacks ids of the old one",
				slog.String("tenant", s.Tenant), slog.String("broker", old.Name), slog.String("migrate_to", upstream.Of(m.New).Name),
				slog.String("missing", c.missing))
		}
	}
	if c.missing == "" {
		return nil
	}
	return osb.Errorf(http.StatusUnprocessableEntity, "",
		"new instances of this route go to broker %q (routes[].migrate_to), whose catalog must carry every service and plan id of broker %q's catalog, which the platform sees; it lacks %s",
		upstream.Of(m.New).Name, old.Name, c.missing)
}

// MissingIDs names the services and plans of old, as the filter shows it,
// whose ids new does not carry ("" when none).
func MissingIDs(f *catalog.Filter, old, new *rules.Index) string {
	var svcs, plans []string
	oc := old.Catalog()
	for i := range oc.Services {
		sv := &oc.Services[i]
		if !f.ServiceVisible(sv) {
			continue
		}
		if new.Service(sv.ID) == nil {
			svcs = append(svcs, strconv.Quote(sv.ID)+" ("+sv.Name+")")
			continue
		}
		for j := range sv.Plans {
			p := &sv.Plans[j]
			if !f.PlanVisible(sv, p) {
				continue
			}
			if ns, np := new.PlanByID(p.ID); np == nil || ns.ID != sv.ID {
				plans = append(plans, strconv.Quote(p.ID)+" ("+sv.Name+"/"+p.Name+")")
			}
		}
	}
	var parts []string
	if len(svcs) > 0 {
		slices.Sort(svcs)
		parts = append(parts, "service ids "+strings.Join(svcs, ", "))
	}
	if len(plans) > 0 {
		slices.Sort(plans)
		parts = append(parts, "plan ids "+strings.Join(plans, ", "))
	}
	return strings.Join(parts, " and ")
}

// The route's parts (Route), each as its feature's type; nil when the
// route has none.
func MigrationOf(rt *core.Route) *Migration { m, _ := rt.Migration.(*Migration); return m }
