package proxy

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/memory"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/proxy/internal/owner"
	"github.com/osb-gateway/osb-gateway/proxy/internal/policies"
	"github.com/osb-gateway/osb-gateway/proxy/internal/protect"
	"github.com/osb-gateway/osb-gateway/proxy/internal/quota"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Options are what a Gateway needs besides its configuration.
type Options struct {
	// Logger receives access lines and errors; nil: slog.Default().
	Logger *slog.Logger
	// AccessLog receives the access lines; nil: they go to Logger at info
	// (warn for 5xx).
	AccessLog *AccessLog
	// Now is the clock; nil: time.Now.
	Now func() time.Time
	// Previous is the Gateway being replaced by a reload, or nil. Upstreams
	// of brokers whose settings did not change are taken over from it, idle
	// connections included; its catalog cache too, less the entries of
	// brokers whose settings changed; its auth limits too (the bcrypt slots
	// and the failures counted per client address) when the auth section
	// did not change them.
	Previous *Gateway
	// Catalogs is the catalog cache; nil: Previous's, else a new one sized
	// by the configuration.
	Catalogs *catalog.Cache
	// Store keeps operation locks; nil: Previous's, else an in-memory store
	// (state lost at exit: for tests).
	Store store.Store
	// Tracing, when set, gives each platform call a server span and each
	// broker call (proxied, catalog fetch, orphan mitigation) a client span
	// whose traceparent the broker gets; nil: no spans, and the platform's
	// own traceparent reaches the broker unchanged.
	Tracing *Tracing
	// Metrics, when set, counts each platform call, times each broker call
	// (proxied, catalog fetch, orphan mitigation) and counts the guard's
	// store errors; nil: nothing is counted. Build one per process and pass
	// it to every Gateway, reloads included.
	Metrics *Metrics
	// Audit, when set, writes one audit record per platform call; nil: no
	// audit stage.
	Audit *core.AuditOptions
	// Transport wraps each broker's own transport, inside the client span
	// and the metering (tests inject broker faults with it); nil: none.
	Transport func(http.RoundTripper) http.RoundTripper
	// BrokerTransport, when set (config.TransportStandard or
	// TransportLean), is every broker's transport, whatever its
	// brokers[].transport says: the test suites run on either with it
	// (OSB_GATEWAY_TEST_TRANSPORT). Empty: each broker's own.
	BrokerTransport string
	// Timer starts the async shim's timers (brokers[].emulate.async_after)
	// and the bound of a provision's wait for a quota's lock another
	// replica holds; nil: time.NewTimer's.
	Timer Timer
}

// suiteTransport is the package's tests' Options.BrokerTransport when theirs
// is empty (OSB_GATEWAY_TEST_TRANSPORT); empty in a binary.
var suiteTransport string

// Gateway is the platform-facing handler built from one configuration. It
// is immutable and safe for concurrent use.
type Gateway struct {
	cfg           *config.Config
	upstreams     map[string]*upstream.Upstream
	catalogs      *catalog.Cache
	guard         *guard.Guard
	auth          *auth.Gate
	flights       *emulate.Flights                     // shared by reloads
	protect       *protect.Protection                  // overload gate and rate limits (protect.go)
	brokerProtect map[string]*protect.BrokerProtection // per broker name (proxy/internal/metrics/brokerprotect.go); nil: no broker has a cap or breaker
	handler       http.Handler
	own           guard.OwnLog    // where the gateway's own actions are written (proxy/internal/guard/reconcile.go)
	policy        *policies.Stage // nil: no route has a policy (internal/policies)
}

// New builds a Gateway from a loaded, valid configuration.
func New(cfg *config.Config, opts Options) (*Gateway, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	g := &Gateway{cfg: cfg, upstreams: make(map[string]*upstream.Upstream, len(cfg.Brokers)), catalogs: opts.Catalogs}
	if g.catalogs == nil && opts.Previous != nil {
		g.catalogs = opts.Previous.catalogs
	}
	if g.catalogs == nil {
		var err error
		if g.catalogs, err = catalog.NewCache(cfg.Catalog, opts.Logger, opts.Now); err != nil {
			return nil, err
		}
	}
	st := opts.Store
	if st == nil && opts.Previous != nil {
		st = opts.Previous.guard.St
	}
	if st == nil {
		st = memory.New(opts.Now)
	}
	g.own = guard.OwnLog{Audit: opts.Audit, Access: opts.AccessLog, Log: opts.Logger}
	g.guard = &guard.Guard{St: st, Now: opts.Now, Log: opts.Logger, Deadline: cfg.State.OperationDeadline, Metrics: opts.Metrics}
	if rc := cfg.State.Reconcile; rc.On() {
		g.guard.WatchAfter, g.guard.WatchEvery = rc.After, rc.Every-cfg.State.SweepTick()/2
	}
	fresh := opts.Previous == nil || opts.Previous.guard.St != st
	if !fresh {
		g.guard.Replica, g.guard.Retry = opts.Previous.guard.Replica, opts.Previous.guard.Retry
	} else {
		g.guard.Replica, g.guard.Retry = core.NewRequestID(), guard.NewReleaser(st, opts.Logger, opts.Metrics)
	}
	g.flights = emulate.NewFlights()
	if opts.Previous != nil {
		g.flights = opts.Previous.flights
	}
	inv, err := guard.NewInventory(cfg, st, opts.Now, opts.Logger, opts.Metrics)
	if err != nil {
		return nil, err
	}
	g.guard.Inv = inv
	polled := func(ctx context.Context, l store.Lock, a rules.Answer) error {
		u := g.upstreams[l.Broker]
		if u == nil {
			return nil
		}
		c := rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID}
		return inv.Polled(ctx, &Scope{Tenant: l.Tenant, Broker: u.Name, Call: c, Route: newRoute("", nil, u)}, l, a)
	}
	g.guard.Retry.Polled.Store(&polled)
	g.guard.TookOver = g.guard.TakeOver
	g.guard.Cfg, g.guard.Upstreams, g.guard.Catalogs, g.guard.Own = cfg, g.upstreams, g.catalogs, g.own
	pool := upstream.NewBufferPool()
	var errs []error
	for i := range cfg.Brokers {
		b := &cfg.Brokers[i]
		if opts.Previous != nil {
			if old := opts.Previous.upstreams[b.Name]; old != nil && old.SameAs(b) {
				g.upstreams[b.Name] = old
				continue
			}
		}
		if old := opts.Previous.upstreamOf(b.Name); old == nil || !old.SameBesidesRetired(b) {
			g.catalogs.Forget(b.Name) // new or changed settings: nothing cached is theirs
		}
		u, err := upstream.New(b, opts.Logger, pool, opts.brokerTransport, cmp.Or(opts.BrokerTransport, suiteTransport), features)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if u.BrokerAuth != nil {
			var prev *upstream.Upstream
			if opts.Previous != nil {
				prev = opts.Previous.upstreams[b.Name]
			}
			u.BrokerAuth.Start(opts.Metrics, prev)
		}
		g.upstreams[b.Name] = u
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	var prevAuth *auth.Gate
	if opts.Previous != nil {
		prevAuth = opts.Previous.auth
	}
	if g.auth, err = auth.NewGate(cfg.Auth, opts.Now, prevAuth); err != nil {
		return nil, err
	}
	var prevBrokerProtect map[string]*protect.BrokerProtection
	if opts.Previous != nil {
		prevBrokerProtect = opts.Previous.brokerProtect
	}
	g.brokerProtect = protect.BrokerProtections(cfg, func(name string) bool {
		return opts.Previous != nil && opts.Previous.upstreams[name] == g.upstreams[name]
	},
		prevBrokerProtect, opts.Now, opts.Logger, opts.Metrics)
	table := routeTable{}
	for i := range cfg.Tenants {
		tc := &cfg.Tenants[i]
		t, err := auth.NewTenant(tc)
		if err != nil {
			return nil, err
		}
		for _, rc := range tc.Routes {
			u := g.upstreams[rc.Broker]
			if u == nil {
				return nil, fmt.Errorf("tenant %q: route to unknown broker %q", tc.Name, rc.Broker)
			}
			rt := newRoute(rc.Prefix, t, u)
			rt.Filter, rt.BrokerProtect, rt.Guard = catalog.NewFilter(rc), g.brokerProtect[rc.Broker], g.guard
			if ids := routes.NewIDs(rc); ids != nil {
				rt.IDs = ids // never a typed nil: the upstream asks the part for its interface
			}
			table[rc.Prefix] = rt
		}
	}
	var prevProtect *protect.Protection
	if opts.Previous != nil {
		prevProtect = opts.Previous.protect
	}
	if g.protect, err = protect.NewProtection(cfg, table, st, protect.ProtectionOptions{Now: opts.Now, Logger: opts.Logger, Metrics: opts.Metrics, Previous: prevProtect}); err != nil {
		return nil, err
	}
	g.auth.InFlight = g.protect.Overload // a bcrypt check waits out of its count
	// Before the migrations: a migration's copy of a route carries its policies.
	if g.policy, err = policies.New(cfg, table, opts.Previous.policyState(), g.catalogs, st, opts.Metrics, opts.Logger); err != nil {
		return nil, err
	}
	for i := range cfg.Tenants {
		for _, rc := range cfg.Tenants[i].Routes {
			if rc.MigrateTo != "" {
				routes.NewMigration(table[rc.Prefix], g.upstreams[rc.MigrateTo], g.brokerProtect[rc.MigrateTo], st, opts.Logger)
			}
		}
	}
	opts.Metrics.Start(cfg)
	for _, b := range cfg.Brokers {
		g.catalogs.StatsFor(b.Name) // the catalog counters show 0 from the start
	}
	g.catalogs.TrackDrift(g.cfg, g.guard.St, g.guard.Inv, opts.Now, opts.Logger, opts.Metrics) // catalog_drift.go
	trusted := core.Proxies(cfg.Listen.TrustedProxyPrefixes())
	owners := owner.New(cfg, st, opts.Logger, opts.Metrics) // proxy/internal/owner
	// The whole request path, outermost first. Trace, metrics and audit
	// are left out (nil) when their part is not set; they read the Scope
	// after the inner stages return, so they see every answer, a
	// recovered panic's 500 included.
	g.handler = Stack(dispatch{},
		withScope(opts.Now),
		observe.WithTrace(opts.Tracing),
		observe.WithMetrics(opts.Metrics),
		observe.WithAudit(opts.Audit, opts.Metrics, opts.Logger, opts.Now, trusted),
		observe.WithRecover(opts.Logger),
		observe.WithAccessLog(opts.Logger, opts.AccessLog, opts.Now, trusted),
		withRoute(table),
		protect.WithOverload(g.protect.Overload), // before anything that costs: see withOverload
		auth.WithAuth(g.auth),
		request.WithBodyLimit(cfg.Listen.MaxBodyBytes), // only after auth: see withBodyLimit
		request.WithVersion(),
		request.WithClassify(),
		routes.WithRetire(cfg),           // nil without a retired broker
		protect.WithRateLimit(g.protect), // nil without limits
		routes.WithIDs(table, g.catalogs),
		owner.WithOwner(owners), // nil without a broker several tenants reach
		request.WithValidate(g.catalogs, g.guard.St, opts.Logger),
		policies.With(g.policy), // nil without policies; before anything that takes a lock, slot or count
		routes.WithCatalog(g.catalogs),
		emulate.WithFlights(g.flights),
		protect.WithBrokerProtect(g.brokerProtect != nil),
		quota.With(cfg, g.guard, opts.Metrics, opts.Timer), // nil without quotas; before the guard: see guard.WithQuota
		guard.WithGuard(g.guard),
		owner.WithOwnerHeld(owners),
		routes.WithRetiredGone(cfg), // nil without a broker retired with answer: gone
		emulate.WithEmulate(g.catalogs),
		emulate.WithShim(g.guard, opts.Timer),
		protect.WithBrokerCall(g.brokerProtect != nil),
	)
	if fresh && cfg.State.Backend == store.BackendBolt {
		// The bolt file is this process's alone: a broker call the async
		// shim ran for a process before it is over.
		ctx, cancel := context.WithTimeout(context.Background(), guard.ReleaseTimeout)
		emulate.SettleLostShims(ctx, g.guard)
		cancel()
	}
	return g, nil
}

// ServeHTTP serves one platform request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.handler.ServeHTTP(w, r) }

// Config returns the configuration g was built from; callers must not
// modify it.
func (g *Gateway) Config() *config.Config { return g.cfg }

// Catalogs returns the catalog cache g serves from.
func (g *Gateway) Catalogs() *catalog.Cache { return g.catalogs }

// WarmCatalogs fetches every broker's catalog at rules.CloudControllerVersion (capped at the
// broker's maximum) and returns what failed.
func (g *Gateway) WarmCatalogs(ctx context.Context) error {
	var errs []error
	for _, b := range g.cfg.Brokers {
		u := g.upstreams[b.Name]
		if _, err := g.catalogs.Load(ctx, catalog.Fetch{Up: u, Key: catalog.Key{Broker: u.Name, Version: u.WarmVersion().String()}, ReqID: core.NewRequestID(), Force: true}, nil); err != nil {
			errs = append(errs, fmt.Errorf("broker %q: %w", b.Name, err))
		}
	}
	return errors.Join(errs...)
}

// CatalogsReady reports nil once every broker's catalog was fetched at
// least once, or which were not.
func (g *Gateway) CatalogsReady() error {
	var missing []string
	for _, b := range g.cfg.Brokers {
		st := g.catalogs.StatsFor(b.Name)
		st.Mu.Lock()
		ok := st.FetchedOnce
		st.Mu.Unlock()
		if !ok {
			missing = append(missing, b.Name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("no catalog fetched yet from brokers %q", missing)
	}
	return nil
}

// Close releases idle broker connections of upstreams that next does not
// use. In-flight requests are not interrupted. next may be nil: the
// gateway is stopping, and the queue of settlements the store has not
// taken yet (logged) is dropped.
func (g *Gateway) Close(next *Gateway) {
	if next == nil || next.guard.Retry != g.guard.Retry {
		g.guard.Retry.Close()
	}
	for name, u := range g.upstreams {
		if next != nil && next.upstreams[name] == u {
			continue
		}
		if u.BrokerAuth.Rotating() && (next == nil || next.upstreams[name] == nil || !next.upstreams[name].BrokerAuth.Rotating()) {
			g.guard.Metrics.ForgetBrokerCredential(name) // the broker has no second credential any more
		}
		u.Transport.CloseIdleConnections()
	}
}

// brokerTransport wraps a broker's own transport in what every call to
// the broker passes through, proxied or made by the gateway itself
// (catalog fetch, orphan mitigation), outermost first: the metering, the
// client span, then Options.Transport.
func (opts *Options) brokerTransport(rt http.RoundTripper) http.RoundTripper {
	if opts.Transport != nil {
		rt = opts.Transport(rt)
	}
	rt = opts.Tracing.Transport(rt)
	return opts.Metrics.Transport(rt)
}

// dispatch is the innermost handler: the matched route's upstream.
type dispatch struct{}

func (dispatch) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	upstream.Of(ScopeOf(w, r).Route).ServeHTTP(w, r)
}

// Switch serves each request with the Gateway current when the request
// arrived; Store swaps in a new one atomically.
type Switch struct{ cur atomic.Pointer[Gateway] }

// NewSwitch returns a Switch serving g.
func NewSwitch(g *Gateway) *Switch {
	s := &Switch{}
	s.cur.Store(g)
	return s
}

// Load returns the current Gateway.
func (s *Switch) Load() *Gateway { return s.cur.Load() }

// Store makes g current and returns the Gateway it replaced.
func (s *Switch) Store(g *Gateway) *Gateway { return s.cur.Swap(g) }

// ServeHTTP serves r with the current Gateway.
func (s *Switch) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.cur.Load().ServeHTTP(w, r) }

// features are the upstreams' hooks into the gateway's features.
var features = upstream.Hooks{
	Shield:   func(rt http.RoundTripper, b *config.Broker) http.RoundTripper { return emulate.NewPollShield(rt, b) },
	WaitSync: emulate.WaitSync,
}
