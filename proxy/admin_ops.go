package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// operationStatus is one row of GET /admin/operations.
type operationStatus struct {
	store.Lock
	AgeSeconds      float64 `json:"age_seconds"`
	DeadlineSeconds float64 `json:"deadline_in_seconds"`
}

// MountOperationsAdmin adds the operation and orphan control endpoints,
// behind the bearer token admin.token (without one they answer 403):
//
//	GET    /admin/operations?broker=&tenant=     locks and async operations, with age and deadline
//	DELETE /admin/operations/{broker}/{instance} force release (?reason=…, logged with who and why)
//	GET    /admin/orphans                        orphan candidates, queued and given up
//	POST   /admin/orphans/{id}/retry             try an orphan's mitigation now
func (a *Admin) MountOperationsAdmin(sw *Switch, log *slog.Logger) {
	h := func(fn func(w http.ResponseWriter, r *http.Request, g *Gateway)) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			g := sw.Load()
			if !tokenOK(g, r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="osb-gateway admin"`)
				writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "a valid admin bearer token (admin.token) is required"})
				return
			}
			fn(w, r, g)
		}
	}
	a.mux.HandleFunc("GET /admin/operations", h(func(w http.ResponseWriter, r *http.Request, g *Gateway) {
		locks, err := g.guard.st.List(r.Context(), store.ListFilter{Broker: r.URL.Query().Get("broker"), Tenant: r.URL.Query().Get("tenant")})
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		now := g.guard.now()
		out := make([]operationStatus, 0, len(locks))
		for _, l := range locks {
			l.TraceParent = ""
			out = append(out, operationStatus{Lock: l, AgeSeconds: now.Sub(l.Started).Seconds(), DeadlineSeconds: l.Deadline.Sub(now).Seconds()})
		}
		writeJSON(w, http.StatusOK, map[string]any{"operations": out})
	}))
	a.mux.HandleFunc("DELETE /admin/operations/{broker}/{instance}", h(func(w http.ResponseWriter, r *http.Request, g *Gateway) {
		reason := r.URL.Query().Get("reason")
		if reason == "" {
			writeJSON(w, http.StatusBadRequest, map[string]string{"error": "say why with ?reason=…; it is logged"})
			return
		}
		l, err := g.guard.st.ForceRelease(r.Context(), store.LockKey(r.PathValue("broker"), r.PathValue("instance")))
		switch {
		case errors.Is(err, store.ErrNotFound):
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no operation in progress on that instance"})
			return
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		log.LogAttrs(r.Context(), slog.LevelWarn, "operation force-released by an operator", slog.String("broker", l.Broker),
			slog.String("instance_id", l.InstanceID), slog.String("kind", l.Kind), slog.Bool("async", l.Async),
			slog.String("who", operator(r)), slog.String("reason", reason))
		l.TraceParent = ""
		writeJSON(w, http.StatusOK, map[string]any{"released": l})
	}))
	a.mux.HandleFunc("GET /admin/orphans", h(func(w http.ResponseWriter, r *http.Request, g *Gateway) {
		os, err := g.guard.st.ListOrphans(r.Context())
		if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"orphans": os})
	}))
	a.mux.HandleFunc("POST /admin/orphans/{id}/retry", h(func(w http.ResponseWriter, r *http.Request, g *Gateway) {
		o, err := g.guard.st.GetOrphan(r.Context(), r.PathValue("id"))
		if errors.Is(err, store.ErrNotFound) {
			writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such orphan"})
			return
		} else if err != nil {
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		g.mitigate(r.Context(), o)
		after, err := g.guard.st.GetOrphan(r.Context(), o.ID)
		if errors.Is(err, store.ErrNotFound) {
			writeJSON(w, http.StatusOK, map[string]string{"result": "mitigated"})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"result": "failed", "orphan": after})
	}))
}

// tokenOK compares the bearer token with admin.token in constant time.
func tokenOK(g *Gateway, r *http.Request) bool {
	want := g.cfg.Admin.Token.Reveal()
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if want == "" || !ok {
		return false
	}
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// operator names who made an admin call: the X-Operator header when set,
// and the remote address.
func operator(r *http.Request) string {
	if op := r.Header.Get("X-Operator"); op != "" {
		return op + " from " + r.RemoteAddr
	}
	return r.RemoteAddr
}
