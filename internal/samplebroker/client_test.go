package samplebroker

import (
	"testing"

	osbc "sigs.k8s.io/go-open-service-broker-client/v2"
)

// newClient returns the real OSB client (the one the integration tests use)
// pointed at the fixture.
func (f *fixture) newClient(t *testing.T, v osbc.APIVersion) osbc.Client {
	t.Helper()
	cfg := osbc.DefaultClientConfiguration()
	cfg.URL = f.srv.URL
	cfg.APIVersion = v
	cfg.AuthConfig = &osbc.AuthConfig{BasicAuthConfig: &osbc.BasicAuthConfig{Username: testUser, Password: testPass}}
	c, err := osbc.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestOSBClient drives a whole async lifecycle through
// sigs.k8s.io/go-open-service-broker-client, proving the broker's answers
// parse as the client expects.
func TestOSBClient(t *testing.T) {
	f := newFixture(t, Options{})
	c := f.newClient(t, osbc.Version2_14())
	svc, plan := ServiceID, PlanAsyncID

	cat, err := c.GetCatalog()
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Services) != 2 || cat.Services[0].Plans[0].Schemas == nil || !cat.Services[0].InstancesRetrievable {
		t.Errorf("catalog as the client sees it: %+v", cat.Services)
	}

	poll := func(op *osbc.OperationKey) osbc.LastOperationState {
		t.Helper()
		resp, err := c.PollLastOperation(&osbc.LastOperationRequest{InstanceID: id, ServiceID: &svc, PlanID: &plan, OperationKey: op})
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		return resp.State
	}
	prov, err := c.ProvisionInstance(&osbc.ProvisionRequest{InstanceID: id, AcceptsIncomplete: true,
		ServiceID: svc, PlanID: plan, OrganizationGUID: "org", SpaceGUID: "space"})
	if err != nil || !prov.Async || prov.OperationKey == nil {
		t.Fatalf("provision: %+v, %v", prov, err)
	}
	if st := poll(prov.OperationKey); st != osbc.StateInProgress {
		t.Errorf("state %q", st)
	}
	_, err = c.UpdateInstance(&osbc.UpdateInstanceRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: svc})
	if !osbc.IsConcurrencyError(err) {
		t.Errorf("update while provisioning: %v, want a ConcurrencyError", err)
	}
	f.clock.Advance(DefaultAsyncDelay)
	if st := poll(prov.OperationKey); st != osbc.StateSucceeded {
		t.Errorf("state %q", st)
	}
	if inst, err := c.GetInstance(&osbc.GetInstanceRequest{InstanceID: id}); err != nil || inst.PlanID != plan {
		t.Errorf("get instance: %+v, %v", inst, err)
	}

	bind, err := c.Bind(&osbc.BindRequest{InstanceID: id, BindingID: bid, AcceptsIncomplete: true, ServiceID: svc, PlanID: plan})
	if err != nil || !bind.Async {
		t.Fatalf("bind: %+v, %v", bind, err)
	}
	f.clock.Advance(DefaultAsyncDelay)
	bl, err := c.PollBindingLastOperation(&osbc.BindingLastOperationRequest{InstanceID: id, BindingID: bid, OperationKey: bind.OperationKey})
	if err != nil || bl.State != osbc.StateSucceeded {
		t.Fatalf("binding last operation: %+v, %v", bl, err)
	}
	if got, err := c.GetBinding(&osbc.GetBindingRequest{InstanceID: id, BindingID: bid}); err != nil || got.Credentials["password"] == "" {
		t.Errorf("get binding: %+v, %v", got, err)
	}
	if _, err := c.Unbind(&osbc.UnbindRequest{InstanceID: id, BindingID: bid, ServiceID: svc, PlanID: plan}); err != nil {
		t.Errorf("unbind: %v", err)
	}

	dep, err := c.DeprovisionInstance(&osbc.DeprovisionRequest{InstanceID: id, AcceptsIncomplete: true, ServiceID: svc, PlanID: plan})
	if err != nil || !dep.Async {
		t.Fatalf("deprovision: %+v, %v", dep, err)
	}
	f.clock.Advance(DefaultAsyncDelay)
	_, err = c.PollLastOperation(&osbc.LastOperationRequest{InstanceID: id, OperationKey: dep.OperationKey})
	if !osbc.IsGoneError(err) {
		t.Errorf("poll after deprovision: %v, want Gone", err)
	}
	_, err = c.ProvisionInstance(&osbc.ProvisionRequest{InstanceID: id, ServiceID: svc, PlanID: plan, OrganizationGUID: "o", SpaceGUID: "s"})
	if !osbc.IsAsyncRequiredError(err) {
		t.Errorf("provision without accepts_incomplete: %v, want AsyncRequired", err)
	}
}
