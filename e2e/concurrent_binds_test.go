package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// concurrentBinds is how many bindings of one instance a deploy pipeline
// creates at once.
const concurrentBinds = 20

// TestConcurrentBindsOfOneInstance: Cloud Controller lets different
// bindings of one instance be created side by side, and so must the
// gateway (it refused all but one: its lock was per instance). Driven with
// the real OSB client: 20 concurrent binds of different bindings all
// succeed, synchronously and asynchronously; while the asynchronous ones
// are in progress, a deprovision of the instance gets the blocking answer.
func TestConcurrentBindsOfOneInstance(t *testing.T) {
	e := newEnv(t)
	c := e.client(t, prodSample, osb.Version2_14(), prodUser, prodPass)
	bindAll := func(instance, plan string, async bool) []error {
		errs := make([]error, concurrentBinds)
		var wg sync.WaitGroup
		for i := range concurrentBinds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				app := fmt.Sprintf("app-%d", i)
				res, err := c.Bind(&osb.BindRequest{InstanceID: instance, BindingID: fmt.Sprintf("%s-b%d", instance, i),
					ServiceID: samplebroker.ServiceID, PlanID: plan, AcceptsIncomplete: async,
					BindResource: &osb.BindResource{AppGUID: &app}})
				if err == nil && res.Async != async {
					err = fmt.Errorf("async %t, want %t", res.Async, async)
				}
				errs[i] = err
			}()
		}
		wg.Wait()
		return errs
	}

	if _, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "db-sync", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanSyncID, OrganizationGUID: "org", SpaceGUID: "space"}); err != nil {
		t.Fatalf("provision: %v", err)
	}
	for i, err := range bindAll("db-sync", samplebroker.PlanSyncID, false) {
		if err != nil {
			t.Errorf("synchronous bind %d: %v", i, err)
		}
	}

	res, err := c.ProvisionInstance(&osb.ProvisionRequest{InstanceID: "db-async", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanAsyncID, OrganizationGUID: "org", SpaceGUID: "space", AcceptsIncomplete: true})
	if err != nil || !res.Async {
		t.Fatalf("async provision: %+v %v", res, err)
	}
	e.poll(t, func() (*osb.LastOperationResponse, error) {
		return c.PollLastOperation(&osb.LastOperationRequest{InstanceID: "db-async", ServiceID: strp(samplebroker.ServiceID),
			PlanID: strp(samplebroker.PlanAsyncID), OperationKey: res.OperationKey})
	})
	for i, err := range bindAll("db-async", samplebroker.PlanAsyncID, true) {
		if err != nil {
			t.Errorf("asynchronous bind %d: %v", i, err)
		}
	}
	before := e.sample.Count(samplebroker.EndpointDeprovision)
	_, err = c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "db-async", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanAsyncID, AcceptsIncomplete: true})
	var he osb.HTTPStatusCodeError
	if !asHTTPError(err, &he) || he.StatusCode != http.StatusBadRequest || he.Description == nil || *he.Description != proxy.InProgress {
		t.Errorf("deprovision while binds are in progress: %v, want 400 %q", err, proxy.InProgress)
	}
	if e.sample.Count(samplebroker.EndpointDeprovision) != before {
		t.Error("the blocked deprovision reached the broker")
	}
	// Once the binds are done, the instance's deprovision goes through.
	e.clock.Advance(2 * asyncDelay)
	for i := range concurrentBinds {
		lo, err := c.PollBindingLastOperation(&osb.BindingLastOperationRequest{InstanceID: "db-async",
			BindingID: fmt.Sprintf("db-async-b%d", i), ServiceID: strp(samplebroker.ServiceID), PlanID: strp(samplebroker.PlanAsyncID)})
		if err != nil || lo.State != osb.StateSucceeded {
			t.Fatalf("binding %d last_operation: %+v %v", i, lo, err)
		}
	}
	_, err = c.DeprovisionInstance(&osb.DeprovisionRequest{InstanceID: "db-async", ServiceID: samplebroker.ServiceID,
		PlanID: samplebroker.PlanAsyncID, AcceptsIncomplete: true})
	if err != nil && strings.Contains(err.Error(), proxy.InProgress) {
		t.Errorf("deprovision after the binds: %v", err)
	}
}

func strp(s string) *string { return &s }

func asHTTPError(err error, he *osb.HTTPStatusCodeError) bool {
	e, ok := err.(osb.HTTPStatusCodeError)
	if ok {
		*he = e
	}
	return ok
}
