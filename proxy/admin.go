package proxy

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Admin is the operator-facing handler served on the admin listener, never
// on the platform listener. /healthz (the process is alive), /readyz (what
// Ready reports: osb-gateway serve is ready once its listeners serve and,
// with catalog.require_warm, every broker's catalog was fetched) and what
// Handle adds (serve adds GET /metrics, the telemetry registry's page with
// the Metrics instruments) are open. Every path under /admin/ is a control
// route added by a Mount method: it needs the bearer token admin.token
// (403 while none is configured, 401 without it or with another), answers
// errors as OSB JSON errors and logs one line per call. Every error the
// admin listener answers, an unknown path or a readiness failure included,
// is an OSB JSON error written by osb.WriteError; LogAccess adds an access
// line per call.
type Admin struct {
	// Ready reports nil when the gateway can take traffic, or why not.
	// nil: always ready.
	Ready func() error
	mux   *http.ServeMux // the open routes
	// ctl serves every path under /admin/. Only control adds to it, so
	// every route there checks the token and logs what it did.
	ctl    *http.ServeMux
	routes []string // the patterns control added, for tests
	sw     *Switch  // the gateway whose admin.token and state the routes use
	log    *slog.Logger
	open   []string // the open patterns ("GET /healthz"), for 404 and 405 answers
	// access and now write the access lines (LogAccess); logAccess: on.
	access    *AccessLog
	now       func() time.Time
	logAccess bool
}

// NewAdmin returns the admin handler. Until a Mount method gives it a
// gateway, paths under /admin/ answer 403.
func NewAdmin(ready func() error) *Admin {
	a := &Admin{Ready: ready, mux: http.NewServeMux(), ctl: http.NewServeMux(), log: slog.Default()}
	a.Handle("GET /healthz", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	a.Handle("GET /readyz", http.HandlerFunc(a.readyz))
	a.mux.HandleFunc("/", a.noOpenRoute)
	a.ctl.Handle("/admin/", a.control("/admin/", noControlRoute))
	return a
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.Ready != nil {
		if err := a.Ready(); err != nil {
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
// pattern under /admin/: control routes are added by the Mount methods,
// behind the token.
func (a *Admin) Handle(pattern string, h http.Handler) {
	path := pattern
	if _, p, ok := strings.Cut(pattern, " "); ok {
		path = p
	}
	if i := strings.IndexByte(path, '/'); i >= 0 && isControlPath(path[i:]) {
		panic("proxy: Admin.Handle(" + pattern + "): routes under /admin/ need the admin token; add them with a Mount method")
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
