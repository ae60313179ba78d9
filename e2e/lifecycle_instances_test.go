package e2e

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"
)

func (l *lifecycle) provisionRequest(id, plan string, params map[string]any, async bool) *osb.ProvisionRequest {
	return &osb.ProvisionRequest{
		InstanceID: id, AcceptsIncomplete: async, ServiceID: l.serviceID, PlanID: plan,
		OrganizationGUID: orgGUID, SpaceGUID: spaceGUID, Parameters: params, Context: cfContext,
	}
}

func (l *lifecycle) provisionSync(t *testing.T) {
	res, err := l.c.ProvisionInstance(l.provisionRequest(syncInstance, l.syncPlan, map[string]any{"size": "small"}, false))
	if err != nil {
		t.Fatalf("ProvisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusCreated)
	if res.Async || res.DashboardURL == nil {
		t.Fatalf("ProvisionInstance = %+v, want synchronous with a dashboard URL", res)
	}
	l.dashboards[syncInstance] = *res.DashboardURL
}

func (l *lifecycle) provisionSyncIdentical(t *testing.T) {
	res, err := l.c.ProvisionInstance(l.provisionRequest(syncInstance, l.syncPlan, map[string]any{"size": "small"}, false))
	if err != nil {
		t.Fatalf("ProvisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	dashboard := l.dashboards[syncInstance]
	if diff := cmp.Diff(&osb.ProvisionResponse{DashboardURL: &dashboard}, res); diff != "" {
		t.Errorf("ProvisionInstance (-want +got):\n%s", diff)
	}
}

func (l *lifecycle) provisionSyncConflicting(t *testing.T) {
	_, err := l.c.ProvisionInstance(l.provisionRequest(syncInstance, l.syncPlan, map[string]any{"size": "large"}, false))
	if !osb.IsConflictError(err) {
		t.Fatalf("ProvisionInstance error = %v, want 409 Conflict", err)
	}
	l.e.wantStatus(t, http.StatusConflict)
}

func (l *lifecycle) getInstance(id, plan string, params map[string]any) func(t *testing.T) {
	return func(t *testing.T) {
		got, err := l.c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		if err != nil {
			t.Fatalf("GetInstance: %v", err)
		}
		l.e.wantStatus(t, http.StatusOK)
		want := &osb.GetInstanceResponse{ServiceID: l.serviceID, PlanID: plan, DashboardURL: l.dashboards[id], Parameters: params}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetInstance (-want +got):\n%s", diff)
		}
	}
}

// getInstanceRefusedByClient checks that a client below 2.14 does not even
// send GET instance, so that the legacy broker never sees one.
func (l *lifecycle) getInstanceRefusedByClient(t *testing.T) {
	if l.modern {
		t.Skip("the client is at 2.14")
	}
	before := len(l.e.gateway.exchanges())
	_, err := l.c.GetInstance(&osb.GetInstanceRequest{InstanceID: syncInstance})
	if _, ok := err.(osb.GetInstanceNotAllowedError); !ok {
		t.Errorf("GetInstance error = %v, want GetInstanceNotAllowedError", err)
	}
	if n := len(l.e.gateway.exchanges()) - before; n != 0 {
		t.Errorf("%d requests reached the gateway, want none", n)
	}
}

func (l *lifecycle) updateSync(t *testing.T) {
	res, err := l.c.UpdateInstance(&osb.UpdateInstanceRequest{
		InstanceID: syncInstance, ServiceID: l.serviceID, Parameters: map[string]any{"size": "medium"}, Context: cfContext,
	})
	if err != nil {
		t.Fatalf("UpdateInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	if res.Async {
		t.Errorf("UpdateInstance = %+v, want synchronous", res)
	}
}

func (l *lifecycle) provisionAsync(t *testing.T) {
	res, err := l.c.ProvisionInstance(l.provisionRequest(asyncInstance, l.asyncPlan, nil, true))
	if err != nil {
		t.Fatalf("ProvisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusAccepted)
	if !res.Async {
		t.Fatalf("ProvisionInstance = %+v, want asynchronous", res)
	}
	l.wantOperation(t, res.OperationKey)
	if res.DashboardURL != nil {
		l.dashboards[asyncInstance] = *res.DashboardURL
	}
	answers, wasGone := l.pollInstance(t, asyncInstance, l.asyncPlan, res.OperationKey)
	l.wantPolls(t, answers, wasGone, succeeded)
}

// provisionAsyncIdentical repeats the finished asynchronous provision: the
// instance exists with the same attributes, so 200.
func (l *lifecycle) provisionAsyncIdentical(t *testing.T) {
	if _, err := l.c.ProvisionInstance(l.provisionRequest(asyncInstance, l.asyncPlan, nil, true)); err != nil {
		t.Fatalf("ProvisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
}

func (l *lifecycle) updateAsync(t *testing.T) {
	res, err := l.c.UpdateInstance(&osb.UpdateInstanceRequest{
		InstanceID: asyncInstance, AcceptsIncomplete: true, ServiceID: l.serviceID,
		Parameters: map[string]any{"tier": "gold"}, Context: cfContext,
	})
	if err != nil {
		t.Fatalf("UpdateInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusAccepted)
	if !res.Async {
		t.Fatalf("UpdateInstance = %+v, want asynchronous", res)
	}
	l.wantOperation(t, res.OperationKey)
	answers, wasGone := l.pollInstance(t, asyncInstance, l.asyncPlan, res.OperationKey)
	l.wantPolls(t, answers, wasGone, succeeded)
}

func (l *lifecycle) deprovisionSync(t *testing.T) {
	res, err := l.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: syncInstance, ServiceID: l.serviceID, PlanID: l.syncPlan})
	if err != nil {
		t.Fatalf("DeprovisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusOK)
	if res.Async {
		t.Errorf("DeprovisionInstance = %+v, want synchronous", res)
	}
}

// deprovisionAgain deletes an instance that is gone: 410 on the wire. The
// client maps 410 on DELETE to success (an empty, synchronous response), so
// osb.IsGoneError cannot see it; the platform-side tap does.
func (l *lifecycle) deprovisionAgain(id, plan string) func(t *testing.T) {
	return func(t *testing.T) {
		res, err := l.c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: id, ServiceID: l.serviceID, PlanID: plan, AcceptsIncomplete: true})
		if err != nil {
			t.Fatalf("DeprovisionInstance: %v", err)
		}
		l.e.wantStatus(t, http.StatusGone)
		if diff := cmp.Diff(&osb.DeprovisionResponse{}, res); diff != "" {
			t.Errorf("DeprovisionInstance (-want +got):\n%s", diff)
		}
	}
}

func (l *lifecycle) deprovisionAsync(t *testing.T) {
	res, err := l.c.DeprovisionInstance(&osb.DeprovisionRequest{
		InstanceID: asyncInstance, AcceptsIncomplete: true, ServiceID: l.serviceID, PlanID: l.asyncPlan,
	})
	if err != nil {
		t.Fatalf("DeprovisionInstance: %v", err)
	}
	l.e.wantStatus(t, http.StatusAccepted)
	if !res.Async {
		t.Fatalf("DeprovisionInstance = %+v, want asynchronous", res)
	}
	l.wantOperation(t, res.OperationKey)
	answers, wasGone := l.pollInstance(t, asyncInstance, l.asyncPlan, res.OperationKey)
	l.wantPolls(t, answers, wasGone, l.deleteEnd)
}

func (l *lifecycle) getInstanceGone(t *testing.T) {
	for _, id := range []string{syncInstance, asyncInstance} {
		_, err := l.c.GetInstance(&osb.GetInstanceRequest{InstanceID: id})
		wantHTTPError(t, err, http.StatusNotFound)
	}
}
