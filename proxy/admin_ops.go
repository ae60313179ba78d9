package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
)

// operationStatus is one row of GET /admin/operations.
type operationStatus struct {
	lockView
	AgeSeconds      float64 `json:"age_seconds"`
	DeadlineSeconds float64 `json:"deadline_in_seconds"`
}

// MountOperationsAdmin adds the operation and orphan control routes to a,
// behind the admin token (see control), logging each call to log (nil:
// slog.Default()):
//
//	GET    /admin/operations?broker=&tenant=     locks and async operations, with age and deadline
//	DELETE /admin/operations/{broker}/{instance} force release (?reason=…, logged with who and why)
//	DELETE /admin/operations/{broker}/{instance}/{binding} force release of a binding's lock
//	POST   /admin/operations/{broker}/{instance}[/{binding}]/reconcile  poll or force its state (admin_reconcile.go)
//	GET    /admin/orphans                        orphan candidates, queued and given up
//	POST   /admin/orphans/{orphan}/retry         try an orphan's mitigation now
func (a *Admin) MountOperationsAdmin(sw *Switch, log *slog.Logger) {
	a.bind(sw, log)
	a.handleControl("GET /admin/operations", listOperations)
	a.handleControl("DELETE /admin/operations/{broker}/{instance}", releaseOperation)
	a.handleControl("DELETE /admin/operations/{broker}/{instance}/{binding}", releaseOperation)
	a.mountReconcile()
	a.handleControl("GET /admin/orphans", func(r *http.Request, g *Gateway) (any, string, error) {
		orphans, err := g.guard.st.ListOrphans(r.Context())
		if err != nil {
			return nil, "", storeError("listing the orphans", err)
		}
		return map[string]any{"orphans": viewOrphans(orphans)}, fmt.Sprintf("listed %d orphans", len(orphans)), nil
	})
	a.handleControl("POST /admin/orphans/{orphan}/retry", retryOrphan)
}

func listOperations(r *http.Request, g *Gateway) (any, string, error) {
	q := r.URL.Query()
	locks, err := g.guard.st.List(r.Context(), store.ListFilter{Broker: q.Get("broker"), Tenant: q.Get("tenant")})
	if err != nil {
		return nil, "", storeError("listing the operations", err)
	}
	now := g.guard.now()
	out := make([]operationStatus, 0, len(locks))
	for _, l := range locks {
		out = append(out, operationStatus{lockView: viewLock(l), AgeSeconds: now.Sub(l.Started).Seconds(), DeadlineSeconds: l.Deadline.Sub(now).Seconds()})
	}
	return map[string]any{"operations": out}, fmt.Sprintf("listed %d operations (broker %q, tenant %q)", len(out), q.Get("broker"), q.Get("tenant")), nil
}

func releaseOperation(r *http.Request, g *Gateway) (any, string, error) {
	reason := r.URL.Query().Get("reason")
	if reason == "" {
		return nil, "", osb.Errorf(http.StatusBadRequest, "", "a force release needs a reason: expected ?reason=… (it is logged), got none")
	}
	l, err := g.releaseOperation(r.Context(), r.PathValue("broker"), r.PathValue("instance"), r.PathValue("binding"), operator(r), reason)
	if err != nil {
		return nil, "", err // audited when it released (reconcile.go)
	}
	did := fmt.Sprintf("force-released the %s lock of tenant %q (async %t, held since %s) because %q",
		l.Kind, l.Tenant, l.Async, l.Started.UTC().Format(time.RFC3339), reason)
	return map[string]any{"released": viewLock(l)}, did, nil
}

func retryOrphan(r *http.Request, g *Gateway) (any, string, error) {
	id := r.PathValue("orphan")
	o, err := g.guard.st.GetOrphan(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", osb.Errorf(http.StatusNotFound, "", "no orphan with id %q", id)
	case err != nil:
		return nil, "", storeError("reading the orphan", err)
	}
	g.mitigate(r.Context(), o)
	after, err := g.guard.st.GetOrphan(r.Context(), o.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return map[string]string{"result": "mitigated"}, fmt.Sprintf("retried the %s of instance %q on broker %q: mitigated", o.Kind, o.InstanceID, o.Broker), nil
	case err != nil:
		return nil, "", storeError("reading the orphan back after its retry", err)
	}
	return map[string]any{"result": "failed", "orphan": viewOrphan(after)},
		fmt.Sprintf("retried the %s of instance %q on broker %q: failed (%s)", o.Kind, o.InstanceID, o.Broker, after.LastError), nil
}

// storeError is the answer when the state store fails: 503 naming what
// failed; the store's own error goes to the log only.
func storeError(what string, err error) error {
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: what + " failed: the state store returned an error; the cause is in the gateway's log"}
}
