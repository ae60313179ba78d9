package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The inventory fixtures the contract and the backends' tests share.

// Instance is an instance of broker with every field set, as a Cloud
// Controller provision leaves it.
func Instance(broker, id, tenant string) store.Instance {
	return store.Instance{
		Broker: broker, InstanceID: id, Tenant: tenant,
		ServiceID: "svc-1", PlanID: "plan-1",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1",` +
			`"instance_name":"db ` + id + `"}`),
		OrganizationGUID: "org-1", SpaceGUID: "space-1",
		DashboardURL:     "https://dashboard.example.com/" + id,
		MaintenanceInfo:  json.RawMessage(`{"version":"1.2.3"}`),
		Metadata:         json.RawMessage(`{"labels":{"tier":"gold"}}`),
		SealedParameters: []byte{1, 0, 0xff, 'x'},
		LastOperation: store.LastOperation{
			Kind: store.KindProvision, State: store.StateSucceeded, Description: "created", Operation: "task-1",
			Status: 200, Started: T0.Add(-time.Minute), Ended: T0.Add(-time.Second),
		},
		Created: T0.Add(-time.Hour), Updated: T0.Add(-time.Second),
	}
}

// Binding is a binding of instance id of broker with every field set.
func Binding(broker, id, binding string) store.Binding {
	return store.Binding{
		Broker: broker, InstanceID: id, BindingID: binding, Tenant: "cf1",
		ServiceID: "svc-1", PlanID: "plan-1", AppGUID: "app-" + binding,
		BindResource:   json.RawMessage(`{"app_guid":"app-` + binding + `"}`),
		SyslogDrainURL: "syslog://logs.example.com", RouteServiceURL: "https://route.example.com",
		VolumeMounts:     json.RawMessage(`[{"driver":"nfs"}]`),
		Endpoints:        json.RawMessage(`[{"host":"db.example.com","ports":["5432"]}]`),
		SealedParameters: []byte("sealed-params"), SealedCredentials: []byte("sealed-creds\x00"),
		ExpiresAt: T0.Add(30 * 24 * time.Hour), RenewBefore: T0.Add(23 * 24 * time.Hour),
		LastOperation: store.LastOperation{Kind: store.KindBind, State: store.StateSucceeded, Status: 201, Started: T0, Ended: T0},
		Created:       T0, Updated: T0,
	}
}

// MustPutInstance puts in on s and returns it as stored, or fails t.
func MustPutInstance(t *testing.T, s store.Store, in store.Instance) store.Instance {
	t.Helper()
	got, err := s.PutInstance(context.Background(), in)
	if err != nil {
		t.Fatalf("PutInstance(%s/%s): %v", in.Broker, in.InstanceID, err)
	}
	return got
}

// MustPutBinding puts b on s and returns it as stored, or fails t.
func MustPutBinding(t *testing.T, s store.Store, b store.Binding) store.Binding {
	t.Helper()
	got, err := s.PutBinding(context.Background(), b)
	if err != nil {
		t.Fatalf("PutBinding(%s/%s/%s): %v", b.Broker, b.InstanceID, b.BindingID, err)
	}
	return got
}
