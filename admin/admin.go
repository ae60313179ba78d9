// Package admin is the operator's JSON API on the admin listener: health
// and readiness, and the control routes under /admin/ (brokers and their
// catalogs, catalog drift, locks and their reconcile, orphans, the
// inventory, reload, the runtime profiles). It reaches the gateway only
// through proxy.View, the narrow view the gateway exports; package proxy
// keeps the request path. The status pages (package console) are served
// beside it on the same listener.
//
// A control route is a pattern and a handlerFunc registered by a mount
// function of this package (see New); the route wrapper (control) checks
// the admin token, answers errors as OSB JSON errors and logs one line per
// call, so a route only reads the View and returns its answer.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// Admin is the operator-facing handler served on the admin listener, never
// on the platform listener. /healthz (the process is alive), /readyz (what
// Options.Ready reports: osb-gateway serve is ready once its listeners
// serve and, with catalog.require_warm, every broker's catalog was
// fetched) and what Handle adds (serve adds GET /metrics, the telemetry
// registry's page with the Metrics instruments, and the console's pages)
// are open. Every path under /admin/ is a control route: it needs the
// bearer token admin.token (403 while none is configured, 401 without it
// or with another, 429 without comparing it from a client address that
// presented too many wrong ones: package tokenlimit), answers errors as
// OSB JSON errors and logs one line per call (one a minute per address
// for the 429s). Every error the admin listener answers, an unknown path or a
// readiness failure included, is an OSB JSON error written by
// osb.WriteError; LogAccess adds an access line per call.
type Admin struct {
	ready func() error
	mux   *http.ServeMux // the open routes
	// ctl serves every path under /admin/. Only handle adds to it, so
	// every route there checks the token and logs what it did.
	ctl    *http.ServeMux
	routes []string    // the patterns handle added, for tests
	view   *proxy.View // the gateway whose admin.token and state the routes use; nil: none
	log    *slog.Logger
	reload ReloadFunc
	open   []string // the open patterns ("GET /healthz"), for 404 and 405 answers
	// access and now write the access lines (LogAccess); logAccess: on.
	access    *proxy.AccessLog
	now       func() time.Time
	logAccess bool
	// tokens limits refused admin tokens per client address.
	tokens *tokenlimit.Limiter
}

// Options are what New needs besides the gateway's view.
type Options struct {
	// Ready reports nil when the gateway can take traffic, or why not.
	// nil: always ready.
	Ready func() error
	// Log is where each control call logs its line (nil: slog.Default()).
	Log *slog.Logger
	// Reload reloads the configuration (POST /admin/reload); nil: that
	// route is not served.
	Reload ReloadFunc
	// Tokens limits refused admin tokens per client address; serve shares
	// one with the console's login, so a guess counts wherever it is made.
	// nil: a limiter of the admin's own on the view's clock.
	Tokens *tokenlimit.Limiter
}

// New returns the admin handler over the gateway view v, with every
// control route mounted. With a nil v only the open routes serve; paths
// under /admin/ answer 403.
//
// A new control route is a mount function in this package (one file per
// area, as usage.go would be) that calls a.handle for each pattern, added
// to the list below, to the adminRoutes list of the tests and to the admin
// API section of docs/operating.md.
func New(v *proxy.View, o Options) *Admin {
	a := &Admin{ready: o.Ready, mux: http.NewServeMux(), ctl: http.NewServeMux(), log: slog.Default(), view: v, reload: o.Reload,
		tokens: o.Tokens}
	if o.Log != nil {
		a.log = o.Log
	}
	if a.tokens == nil {
		now := time.Now
		if v != nil {
			now = v.Now
		}
		a.tokens = tokenlimit.New(now)
	}
	a.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	a.Handle("GET /readyz", http.HandlerFunc(a.readyz))
	a.mux.HandleFunc("/", a.noOpenRoute)
	a.ctl.Handle("/admin/", a.control("/admin/", noControlRoute))
	if v == nil {
		return a
	}
	for _, mount := range []func(*Admin){
		(*Admin).mountCatalogs,   // catalog.go, drift.go
		(*Admin).mountOperations, // ops.go, reconcile.go
		(*Admin).mountInventory,  // inventory.go
		(*Admin).mountUsage,      // usage.go
		(*Admin).mountReload,     // reload.go
		(*Admin).mountPprof,      // pprof.go
	} {
		mount(a)
	}
	return a
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.ready != nil {
		if err := a.ready(); err != nil {
			// Ready's errors say why in words meant for the operator.
			osb.WriteError(w, &osb.Error{Status: http.StatusServiceUnavailable, Description: "not ready: " + err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ServeHTTP implements http.Handler: paths under /admin/ go to the control
// routes, the rest to the open ones.
// Every answer is written with an access line when LogAccess was called.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var h http.Handler = a.mux
	if isControlPath(r.URL.Path) {
		h = a.ctl
	}
	if a.logAccess {
		a.serveLogged(w, r, h)
		return
	}
	h.ServeHTTP(w, r)
}

// Handle adds an open endpoint such as GET /metrics. It panics for a
// pattern under /admin/: control routes are added by this package's mount
// functions, behind the token.
func (a *Admin) Handle(pattern string, h http.Handler) {
	path := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		path = p
	}
	if i := strings.IndexByte(path, '/'); i >= 0 && isControlPath(path[i:]) {
		panic("admin: Admin.Handle(" + pattern + "): routes under /admin/ need the admin token; add them as a control route of package admin")
	}
	a.mux.Handle(pattern, h)
	a.open = append(a.open, pattern)
}

// isControlPath reports whether path is /admin or under /admin/.
func isControlPath(path string) bool {
	return path == "/admin" || strings.HasPrefix(path, "/admin/")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// ReloadFunc reloads the configuration as SIGHUP does and says what is now
// in force, or why the running configuration stays. It must be safe for
// concurrent use.
type ReloadFunc func(ctx context.Context) (Reloaded, error)
