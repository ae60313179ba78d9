// Package proxy is the gateway's HTTP surface: the middleware chain every
// platform request passes through, the per-broker reverse proxies, and the
// admin API.
//
// New builds the whole chain in one place. A request passes, outermost
// first: scope, trace, metrics, audit, recover, access log, route,
// overload, auth, body, version, classify, retire, rate limit, route ids,
// owner, validate, policy, catalog, flights, broker protect, quota, guard,
// owner held, retired gone, emulate, shim, broker call, upstream.
// Trace, metrics and audit are the optional parts (Options.Tracing,
// Metrics, Audit), left out when not set, as is the rate limit without
// limits in the configuration; they and the access log read the Scope
// after the inner stages return. Broker protect and broker call are left
// out when no broker has max_in_flight or a breaker (internal/protect: the
// protect stage takes a slot and a breaker permit before the guard, so no
// refused call takes a lock; the broker call stage gives them back when
// the broker call ends). Each stage is a small Middleware that reads and
// fills the request's *Scope and never mutates the inbound *http.Request.
//
// Every call to a broker — proxied by the upstream stage, or made by the
// gateway itself (catalog fetches, orphan mitigation) — goes through one
// transport per broker: the metering, then the client span, then the
// broker's own transport, net/http's or the lean one (internal/lean, per
// brokers[].transport; Options.Transport may wrap it, for tests). So
// each is timed in osb_gateway_broker_duration_seconds and traced as a
// client span named by its endpoint. The upstream stage's reverse proxy
// reaches that transport through the poll shield (proxy/internal/emulate/pollshield.go), which
// lets last_operation polls of one operation share a broker call and
// reuse an "in progress" answer, and passes every other call straight on.
//
// Route, overload and auth look at the request line and headers only, and
// run before the body stage reads a byte of the body: a client that is not
// authenticated, or a call shed under overload, cannot make the gateway
// read or buffer a body, and its refusal goes out at once and closes the
// connection (Scope.FailUnread).
// Nothing before the body stage may depend on the body.
//
// A stage finds the Scope with ScopeOf(w, r): the scope stage hands the
// inner stages a ResponseWriter that carries it, so no stage copies the
// request just to pass the Scope on. The upstream stage puts it in the
// broker call's context, where the reverse proxy's callbacks and the broker
// transports find it with ScopeFrom.
//
// Protocol decisions are the rules package's: a stage branches on what
// rules hands back and never decodes an OSB payload itself. The version
// stage takes rules.Negotiate's versions; the validate stage the request
// rules.CheckRequest decoded; the classify stage what a broker's version
// predates from rules.ForwardingFor, which the upstream's rewrite and
// rules.Bridge leave out of the broker call; the guard the lock kind and
// the refusal of rules.LockKind and rules.Busy; the catalog stage serves a
// tenant's view from rules.Index.View. The upstream stage reads the
// broker's answer once, with rules.CheckResponse (or rules.ReadResponse
// when the broker's answers are not checked), and the guard settles locks,
// polls and orphans from the rules.Answer it returns.
//
// The shim stage (brokers[].emulate.async_after) may run the rest of a
// call in a goroutine of its own, on a copy of the request's Scope
// (Scope.Fork) answering into a buffer, so that the platform can get a 202
// while the broker call runs on: the copy goes back into the Scope
// (Scope.Adopt) only when its answer reaches the platform after all, so no
// Scope is ever written by two goroutines.
//
// A Gateway is built once from a *config.Config and never changes; a reload
// builds a new Gateway and swaps it into a Switch, so in-flight requests
// finish on the configuration they started with.
//
// Package proxy is the assembly of the packages under proxy/internal, which
// only it may import: the core (internal/core: the Scope, the route, the
// stage type), services (internal/accesslog, internal/metrics,
// internal/usage) and stages (internal/auth, internal/emulate,
// internal/observe, internal/owner, internal/protect, internal/request). Their
// imports point down only, core ← services ← stages ← proxy, as
// TestPackageLayers checks; docs/architecture.md maps them and says what
// still lives here and why.
package proxy

import (
	"net/http"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// Middleware wraps a handler with one stage of the request path.
type Middleware = core.Middleware

// Stack wraps h in mws so that mws[0] is outermost: Stack(h, a, b) serves a
// request through a, then b, then h. A nil Middleware is skipped: a stage
// whose part is not configured stays out of the chain.
func Stack(h http.Handler, mws ...Middleware) http.Handler { return core.Stack(h, mws...) }
