package admin

import (
	"net/http"
	"net/http/pprof"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// pprofPattern is where mountPprof serves Go's runtime profiles.
const pprofPattern = "GET /admin/debug/pprof/"

// mountPprof adds Go's runtime profiles (net/http/pprof: the index, heap,
// goroutine, allocs, block, mutex, threadcreate, profile for CPU, trace,
// symbol) under /admin/debug/pprof/. Like every /admin/ route they need
// the admin token and log one line per call; they answer 404 unless the
// configuration in force sets admin.pprof: true (off by default: a
// profile shows the process's code paths and costs CPU while it runs). The
// command line (pprof's cmdline) is not served.
func (a *Admin) mountPprof() {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index) // Index serves the named profiles too
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	profiles := http.StripPrefix("/admin", mux)
	a.ctl.Handle(pprofPattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		limited, err := a.authorize(r)
		if err == nil && !a.view.Pprof() {
			err = osb.Errorf(http.StatusNotFound, "",
				"admin.pprof is off: the runtime profiles are served only while the configuration sets admin.pprof: true, got %s", r.URL.Path)
		}
		if err != nil {
			e := osb.AsError(err)
			a.logControl(r, pprofPattern, nil, e.Status, e.Description, e, limited)
			osb.WriteError(w, e)
			return
		}
		a.logCall(r, pprofPattern, nil, http.StatusOK, "served the runtime profile "+r.URL.Path, nil)
		profiles.ServeHTTP(w, r)
	}))
	a.routes = append(a.routes, pprofPattern)
}
