package store

import (
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"time"
)

// Fixtures of the tests of the record layout. They are copies of
// storetest's (T0, Instance, Binding, BenchInstance, BenchBinding, GUID):
// a test of package store cannot import storetest, which imports store.

// t0 is the start of every fake clock: a whole second, far from now, so
// backends that used real time would fail the expiry tests.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)

// testInstance is an instance of broker with every field set, as a Cloud
// Controller provision leaves it.
func testInstance(broker, id, tenant string) Instance {
	return Instance{
		Broker: broker, InstanceID: id, Tenant: tenant,
		ServiceID: "svc-1", PlanID: "plan-1",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"org-1","space_guid":"space-1",` +
			`"instance_name":"db ` + id + `"}`),
		OrganizationGUID: "org-1", SpaceGUID: "space-1",
		DashboardURL:     "https://dashboard.example.com/" + id,
		MaintenanceInfo:  json.RawMessage(`{"version":"1.2.3"}`),
		Metadata:         json.RawMessage(`{"labels":{"tier":"gold"}}`),
		SealedParameters: []byte{1, 0, 0xff, 'x'},
		LastOperation: LastOperation{
			Kind: KindProvision, State: StateSucceeded, Description: "created", Operation: "task-1",
			Status: 200, Started: t0.Add(-time.Minute), Ended: t0.Add(-time.Second),
		},
		Created: t0.Add(-time.Hour), Updated: t0.Add(-time.Second),
	}
}

// testBinding is a binding of instance id of broker with every field set.
func testBinding(broker, id, binding string) Binding {
	return Binding{
		Broker: broker, InstanceID: id, BindingID: binding, Tenant: "cf1",
		ServiceID: "svc-1", PlanID: "plan-1", AppGUID: "app-" + binding,
		BindResource:   json.RawMessage(`{"app_guid":"app-` + binding + `"}`),
		SyslogDrainURL: "syslog://logs.example.com", RouteServiceURL: "https://route.example.com",
		VolumeMounts:     json.RawMessage(`[{"driver":"nfs"}]`),
		Endpoints:        json.RawMessage(`[{"host":"db.example.com","ports":["5432"]}]`),
		SealedParameters: []byte("sealed-params"), SealedCredentials: []byte("sealed-creds\x00"),
		ExpiresAt: t0.Add(30 * 24 * time.Hour), RenewBefore: t0.Add(23 * 24 * time.Hour),
		LastOperation: LastOperation{Kind: KindBind, State: StateSucceeded, Status: 201, Started: t0, Ended: t0},
		Created:       t0, Updated: t0,
	}
}

// inventorySecrets makes the footprint benchmarks keep sealed parameters
// too (113 bytes: 80 of JSON sealed), and sealed credentials on the
// bindings (145 bytes: 112 of JSON sealed).
var inventorySecrets = flag.Bool("inventory.secrets", false, "inventory footprint benchmarks store sealed parameters")

// benchInstance is an instance as Cloud Controller provisions it through
// the gateway: GUIDs, the 2.15 context with names and empty annotations, a
// dashboard URL, maintenance_info, an asynchronous provision's last
// operation.
func benchInstance() Instance {
	id, org, space := guid(), guid(), guid()
	now := time.Now()
	in := Instance{
		Broker: "mysql-broker", InstanceID: id, Tenant: "cf-prod-eu",
		ServiceID: "3f0e5e2c-1c9a-4d57-8a3e-7f2b9c1d4e60", PlanID: "9d3c2b1a-8e7f-4a6b-9c5d-2e1f0a3b4c5d",
		Context: json.RawMessage(`{"platform":"cloudfoundry","organization_guid":"` + org +
			`","organization_name":"acme-payments","space_guid":"` + space + `","space_name":"production",` +
			`"instance_name":"orders-db-` + id[:8] + `","organization_annotations":{},"space_annotations":{},"instance_annotations":{}}`),
		OrganizationGUID: org, SpaceGUID: space,
		DashboardURL:    "https://mysql.example.com/dashboard/instances/" + id,
		MaintenanceInfo: json.RawMessage(`{"version":"8.0.36"}`),
		LastOperation: LastOperation{
			Kind: KindProvision, State: StateSucceeded, Description: "provisioned",
			Operation: "provision-" + guid(), Status: 200, Started: now.Add(-time.Minute), Ended: now,
		},
		Created: now.Add(-time.Minute), Updated: now,
	}
	if *inventorySecrets { // ciphertext: random, it does not deflate
		in.SealedParameters = make([]byte, 80+33)
		rand.Read(in.SealedParameters)
	}
	return in
}

// benchBinding is a binding of in as Cloud Controller makes it through the
// gateway: an app GUID and bind_resource, an expires_at (so it is in the
// expiry index too), a synchronous bind's last operation.
func benchBinding(in Instance) Binding {
	app, now := guid(), time.Now()
	bd := Binding{
		Broker: in.Broker, InstanceID: in.InstanceID, BindingID: guid(), Tenant: in.Tenant,
		ServiceID: in.ServiceID, PlanID: in.PlanID, AppGUID: app,
		BindResource: json.RawMessage(`{"app_guid":"` + app + `","space_guid":"` + in.SpaceGUID + `"}`),
		ExpiresAt:    now.Add(90 * 24 * time.Hour), RenewBefore: now.Add(60 * 24 * time.Hour),
		LastOperation: LastOperation{Kind: KindBind, State: StateSucceeded, Status: 201, Started: now, Ended: now},
		Created:       now, Updated: now,
	}
	if *inventorySecrets {
		bd.SealedCredentials = make([]byte, 112+33)
		rand.Read(bd.SealedCredentials)
	}
	return bd
}

func guid() string {
	b := make([]byte, 16)
	rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
