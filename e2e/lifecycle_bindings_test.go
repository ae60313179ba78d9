package e2e

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"
)

func (l *lifecycle) bindRequest(id, bindingID, plan, app string, async bool) *osb.BindRequest {
	return &osb.BindRequest{
		BindingID: bindingID, InstanceID: id, AcceptsIncomplete: async, ServiceID: l.serviceID, PlanID: plan,
		BindResource: &osb.BindResource{AppGUID: &app}, Context: cfContext,
	}
}

func (l *lifecycle) bindSync(t *testing.T) {
	res, err := l.c.Bind(l.bindRequest(syncInstance, syncBinding, l.syncPlan, appGUID, false))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	l.e.wantStatus(t, http.StatusCreated)
	if res.Async || len(res.Credentials) == 0 {
		t.Fatalf("Bind = %+v, want synchronous with credentials", res)
	}
	l.syncCreds = res.Credentials
}

func (l *lifecycle) bindSyncIdentical(t *testing.T) {
	res, err := l.c.Bind(l.bindRequest(syncInstance, syncBinding, l.syncPlan, appGUID, false))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	if diff := cmp.Diff(l.syncCreds, res.Credentials); diff != "" {
		t.Errorf("credentials of the repeated bind (-first +repeat):\n%s", diff)
	}
}

func (l *lifecycle) bindSyncConflicting(t *testing.T) {
	_, err := l.c.Bind(l.bindRequest(syncInstance, syncBinding, l.syncPlan, otherAppGUID, false))
	if !osb.IsConflictError(err) {
		t.Fatalf("Bind error = %v, want 409 Conflict", err)
	}
	l.e.wantStatus(t, http.StatusConflict)
}

func (l *lifecycle) getBinding(t *testing.T) {
	got, err := l.c.GetBinding(&osb.GetBindingRequest{InstanceID: syncInstance, BindingID: syncBinding})
	if err != nil {
		t.Fatalf("GetBinding: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	if diff := cmp.Diff(l.syncCreds, got.Credentials); diff != "" {
		t.Errorf("credentials (-bind +get):\n%s", diff)
	}
}

// bindAsyncInstance binds the async plan's instance: asynchronously at 2.14
// (then polls and fetches the binding), synchronously below, where binds
// always are.
func (l *lifecycle) bindAsyncInstance(t *testing.T) {
	res, err := l.c.Bind(l.bindRequest(asyncInstance, asyncBinding, l.asyncPlan, appGUID, l.modern))
	if err != nil {
		t.Fatalf("Bind: %v", err)
	}
	if !l.modern {
		l.e.wantStatus(t, http.StatusCreated)
		if res.Async || len(res.Credentials) == 0 {
			t.Errorf("Bind = %+v, want synchronous with credentials", res)
		}
		return
	}
	l.e.wantStatus(t, http.StatusAccepted)
	if !res.Async {
		t.Fatalf("Bind = %+v, want asynchronous", res)
	}
	l.wantOperation(t, res.OperationKey)
	answers, wasGone := l.pollBinding(t, asyncInstance, asyncBinding, l.asyncPlan, res.OperationKey)
	l.wantPolls(t, answers, wasGone, succeeded)
	got, err := l.c.GetBinding(&osb.GetBindingRequest{InstanceID: asyncInstance, BindingID: asyncBinding})
	if err != nil {
		t.Fatalf("GetBinding: %v", err)
	}
	if len(got.Credentials) == 0 {
		t.Errorf("GetBinding = %+v, want credentials", got)
	}
}

func (l *lifecycle) unbindSync(t *testing.T) {
	res, err := l.c.Unbind(&osb.UnbindRequest{InstanceID: syncInstance, BindingID: syncBinding, ServiceID: l.serviceID, PlanID: l.syncPlan})
	if err != nil {
		t.Fatalf("Unbind: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	if res.Async {
		t.Errorf("Unbind = %+v, want synchronous", res)
	}
}

// unbindSyncAgain unbinds a binding that is gone: 410 on the wire, which the
// client reports as success.
func (l *lifecycle) unbindSyncAgain(t *testing.T) {
	if _, err := l.c.Unbind(&osb.UnbindRequest{InstanceID: syncInstance, BindingID: syncBinding, ServiceID: l.serviceID, PlanID: l.syncPlan}); err != nil {
		t.Fatalf("Unbind: %v", err)
	}
	l.e.wantStatus(t, http.StatusGone)
}

func (l *lifecycle) getBindingGone(t *testing.T) {
	_, err := l.c.GetBinding(&osb.GetBindingRequest{InstanceID: syncInstance, BindingID: syncBinding})
	wantHTTPError(t, err, http.StatusNotFound)
	l.e.wantStatus(t, http.StatusNotFound)
}

func (l *lifecycle) unbindAsyncInstance(t *testing.T) {
	res, err := l.c.Unbind(&osb.UnbindRequest{
		InstanceID: asyncInstance, BindingID: asyncBinding, AcceptsIncomplete: l.modern, ServiceID: l.serviceID, PlanID: l.asyncPlan,
	})
	if err != nil {
		t.Fatalf("Unbind: %v", err)
	}
	if !l.modern {
		l.e.wantStatus(t, http.StatusOK)
		return
	}
	l.e.wantStatus(t, http.StatusAccepted)
	if !res.Async {
		t.Fatalf("Unbind = %+v, want asynchronous", res)
	}
	l.wantOperation(t, res.OperationKey)
	answers, wasGone := l.pollBinding(t, asyncInstance, asyncBinding, l.asyncPlan, res.OperationKey)
	l.wantPolls(t, answers, wasGone, l.deleteEnd)
	_, err = l.c.GetBinding(&osb.GetBindingRequest{InstanceID: asyncInstance, BindingID: asyncBinding})
	wantHTTPError(t, err, http.StatusNotFound)
}
