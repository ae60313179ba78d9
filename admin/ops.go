package admin

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// operationStatus is one row of GET /admin/operations.
type operationStatus struct {
	lockView
	AgeSeconds      float64 `json:"age_seconds"`
	DeadlineSeconds float64 `json:"deadline_in_seconds"`
}

// mountOperations adds the operation and orphan control routes:
//
//	GET    /admin/operations?broker=&tenant=     locks and async operations, with age and deadline
//	DELETE /admin/operations/{broker}/{instance} force release (?reason=…, logged with who and why; the inventory records the outcome unknown)
//	DELETE /admin/operations/{broker}/{instance}/{binding} force release of a binding's lock
//	POST   /admin/operations/{broker}/{instance}[/{binding}]/reconcile  poll or force its state (reconcile.go)
//	GET    /admin/orphans                        orphan candidates, queued and given up
//	POST   /admin/orphans/{orphan}/retry         try an orphan's mitigation now
func (a *Admin) mountOperations() {
	a.handle("GET /admin/operations", listOperations)
	a.handle("DELETE /admin/operations/{broker}/{instance}", releaseOperation)
	a.handle("DELETE /admin/operations/{broker}/{instance}/{binding}", releaseOperation)
	a.mountReconcile()
	a.handle("GET /admin/orphans", func(r *http.Request, v *proxy.View) (any, string, error) {
		orphans, err := v.OrphanRecords(r.Context())
		if err != nil {
			return nil, "", storeError("listing the orphans", err)
		}
		return map[string]any{"orphans": viewOrphans(orphans)}, fmt.Sprintf("listed %d orphans", len(orphans)), nil
	})
	a.handle("POST /admin/orphans/{orphan}/retry", retryOrphan)
}

func listOperations(r *http.Request, v *proxy.View) (any, string, error) {
	q := r.URL.Query()
	locks, err := v.LockRecords(r.Context(), q.Get("broker"), q.Get("tenant"))
	if err != nil {
		return nil, "", storeError("listing the operations", err)
	}
	now := v.Now()
	out := make([]operationStatus, 0, len(locks))
	for _, l := range locks {
		out = append(out, operationStatus{lockView: viewLock(l), AgeSeconds: now.Sub(l.Started).Seconds(), DeadlineSeconds: l.Deadline.Sub(now).Seconds()})
	}
	return map[string]any{"operations": out}, fmt.Sprintf("listed %d operations (broker %q, tenant %q)", len(out), q.Get("broker"), q.Get("tenant")), nil
}

func releaseOperation(r *http.Request, v *proxy.View) (any, string, error) {
	reason := r.URL.Query().Get("reason")
	if reason == "" {
		return nil, "", osb.Errorf(http.StatusBadRequest, "", "a force release needs a reason: expected ?reason=… (it is logged), got none")
	}
	l, err := v.ReleaseLock(r.Context(), r.PathValue("broker"), r.PathValue("instance"), r.PathValue("binding"), operator(r), reason)
	if err != nil {
		return nil, "", err // an *osb.Error; audited when it released
	}
	did := fmt.Sprintf("force-released the %s lock of tenant %q (async %t, held since %s) because %q",
		l.Kind, l.Tenant, l.Async, l.Started.UTC().Format(time.RFC3339), reason)
	return map[string]any{"released": viewLock(l)}, did, nil
}

func retryOrphan(r *http.Request, v *proxy.View) (any, string, error) {
	id := r.PathValue("orphan")
	o, err := v.Orphan(r.Context(), id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, "", osb.Errorf(http.StatusNotFound, "", "no orphan with id %q", id)
	case err != nil:
		return nil, "", storeError("reading the orphan", err)
	}
	v.MitigateOrphan(r.Context(), o)
	after, err := v.Orphan(r.Context(), o.ID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return map[string]string{"result": "mitigated"}, fmt.Sprintf("retried the %s of instance %q on broker %q: mitigated", o.Kind, o.InstanceID, o.Broker), nil
	case err != nil:
		return nil, "", storeError("reading the orphan back after its retry", err)
	}
	return map[string]any{"result": "failed", "orphan": viewOrphan(after)},
		fmt.Sprintf("retried the %s of instance %q on broker %q: failed (%s)", o.Kind, o.InstanceID, o.Broker, after.LastError), nil
}
