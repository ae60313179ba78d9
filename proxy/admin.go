package proxy

import (
	"encoding/json"
	"net/http"
)

// Admin is the operator-facing handler served on the admin listener, never
// on the platform listener: /healthz (the process is alive) and /readyz
// (the configuration is loaded and the listeners are open).
type Admin struct {
	// Ready reports nil when the gateway can take traffic, or why not.
	// nil: always ready.
	Ready func() error
	mux   *http.ServeMux
}

// NewAdmin returns the admin handler.
func NewAdmin(ready func() error) *Admin {
	a := &Admin{Ready: ready, mux: http.NewServeMux()}
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	a.mux.HandleFunc("GET /readyz", a.readyz)
	return a
}

func (a *Admin) readyz(w http.ResponseWriter, r *http.Request) {
	if a.Ready != nil {
		if err := a.Ready(); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready", "reason": err.Error()})
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) { a.mux.ServeHTTP(w, r) }

// Handle adds an admin endpoint (later stages add metrics and controls).
func (a *Admin) Handle(pattern string, h http.Handler) { a.mux.Handle(pattern, h) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
