package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"code.cloudfoundry.org/brokerapi/v13/domain"
	"code.cloudfoundry.org/brokerapi/v13/domain/apiresponses"
)

// Catalog of apiBroker: one bindable service with a synchronous and an
// asynchronous plan.
const (
	apiServiceID     = "b7c52a51-2f0e-4d0a-a6a4-6f3e1d9c0b01"
	apiServiceName   = "api-sample"
	apiPlanSyncID    = "b7c52a51-2f0e-4d0a-a6a4-6f3e1d9c0b02"
	apiPlanSyncName  = "small"
	apiPlanAsyncID   = "b7c52a51-2f0e-4d0a-a6a4-6f3e1d9c0b03"
	apiPlanAsyncName = "large-async"
)

// apiBroker is an in-memory broker written against brokerapi's
// domain.ServiceBroker, the way Cloud Foundry brokers usually are. The async
// plan provisions, updates and deprovisions asynchronously, and binds and
// unbinds asynchronously when the platform accepts it (and, with
// asyncOnlyBinds, refuses them with 422 AsyncRequired otherwise); operations are "in
// progress" until delay has passed on the now clock. Finished deletions
// leave a record behind, so last_operation reports "succeeded" for them and
// every other endpoint treats them as gone. It is safe for concurrent use.
type apiBroker struct {
	now   func() time.Time
	delay time.Duration
	calls atomic.Int64 // ServiceBroker method calls
	// asyncOnlyBinds refuses binds and unbinds of the async plan that do
	// not accept an asynchronous answer with 422 AsyncRequired.
	asyncOnlyBinds bool

	mu        sync.Mutex
	instances map[string]*apiInstance // guarded by mu
	seq       int                     // guarded by mu; operation ids and passwords
}

var _ domain.ServiceBroker = (*apiBroker)(nil)

func newAPIBroker(now func() time.Time, delay time.Duration) *apiBroker {
	return &apiBroker{now: now, delay: delay, instances: make(map[string]*apiInstance)}
}

// Calls returns how many ServiceBroker methods brokerapi has called.
func (b *apiBroker) Calls() int64 { return b.calls.Load() }

// Errors brokerapi has no prebuilt value for.
var (
	errAPIConcurrency = apiresponses.NewFailureResponseBuilder(
		//lint:ignore ST1005 the OSB specification's description, word for word, as brokers send it
		errors.New("Another operation for this service instance is in progress."),
		http.StatusUnprocessableEntity, "concurrency").WithErrorKey("ConcurrencyError").Build()
	errAPIInstanceNotFound = apiresponses.NewFailureResponseBuilder(
		errors.New("the service instance does not exist"), http.StatusNotFound, "instance-not-found").Build()
	errAPIUnknownOperation = apiresponses.NewFailureResponseBuilder(
		errors.New("operation names no operation of this resource"), http.StatusBadRequest, "unknown-operation").Build()
	errAPIWrongService = apiresponses.NewFailureResponseBuilder(
		errors.New("service_id or plan_id does not belong to this service"), http.StatusBadRequest, "wrong-service").Build()
)

type apiOpKind string

const (
	apiOpProvision   apiOpKind = "provision"
	apiOpUpdate      apiOpKind = "update"
	apiOpDeprovision apiOpKind = "deprovision"
	apiOpBind        apiOpKind = "bind"
	apiOpUnbind      apiOpKind = "unbind"
)

// apiOp is an asynchronous operation; its effect is applied once, by the
// first request that sees it due.
type apiOp struct {
	kind    apiOpKind
	id      string
	due     time.Time
	settled bool
	// For updates: what the instance becomes.
	planID string
	params []byte
}

func (o *apiOp) busy() bool { return o != nil && !o.settled }

func (o *apiOp) lastOperation(now time.Time) domain.LastOperation {
	if o == nil {
		return domain.LastOperation{State: domain.Succeeded, Description: "no asynchronous operation"}
	}
	if now.Before(o.due) {
		return domain.LastOperation{State: domain.InProgress, Description: string(o.kind) + " in progress"}
	}
	return domain.LastOperation{State: domain.Succeeded, Description: string(o.kind) + " succeeded"}
}

type apiInstance struct {
	serviceID, planID string
	org, space        string
	params            []byte // canonical JSON object or nil
	live, deleted     bool
	op                *apiOp
	bindings          map[string]*apiBinding
}

type apiBinding struct {
	appGUID       string
	params        []byte
	creds         map[string]any
	live, deleted bool
	op            *apiOp
}

func (in *apiInstance) settle(now time.Time) {
	o := in.op
	if o == nil || o.settled || now.Before(o.due) {
		return
	}
	o.settled = true
	switch o.kind {
	case apiOpProvision:
		in.live = true
	case apiOpUpdate:
		in.planID, in.params = o.planID, o.params
	case apiOpDeprovision:
		in.live, in.deleted, in.bindings = false, true, nil
	}
}

func (bd *apiBinding) settle(now time.Time) {
	o := bd.op
	if o == nil || o.settled || now.Before(o.due) {
		return
	}
	o.settled = true
	switch o.kind {
	case apiOpBind:
		bd.live = true
	case apiOpUnbind:
		bd.live, bd.deleted, bd.creds = false, true, nil
	}
}

// instance returns the settled record of id, tombstones included; the
// caller holds mu.
func (b *apiBroker) instance(id string, now time.Time) *apiInstance {
	in := b.instances[id]
	if in != nil {
		in.settle(now)
	}
	return in
}

// exists reports whether in is provisioned or being provisioned.
func (in *apiInstance) exists() bool { return in != nil && !in.deleted && (in.live || in.op.busy()) }

func (b *apiBroker) newOp(kind apiOpKind, now time.Time) *apiOp {
	b.seq++
	return &apiOp{kind: kind, id: fmt.Sprintf("%s-%d", kind, b.seq), due: now.Add(b.delay)}
}

func isAPIAsyncPlan(planID string) bool { return planID == apiPlanAsyncID }

func apiDashboard(instanceID string) string {
	return "https://api-broker.invalid/dashboard/" + instanceID
}

// canonicalJSON returns a parameters object as sorted, compact JSON, so
// that identical requests compare equal; nil for none.
func canonicalJSON(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, apiresponses.ErrRawParamsInvalid
	}
	if len(m) == 0 {
		return nil, nil
	}
	return json.Marshal(m)
}

// decodeParams turns canonical parameters back into an object, {} for none.
func decodeParams(p []byte) map[string]any {
	m := map[string]any{}
	if p != nil {
		_ = json.Unmarshal(p, &m)
	}
	return m
}

// mergeParams overlays update's top-level keys on old.
func mergeParams(old []byte, update []byte) []byte {
	if update == nil {
		return old
	}
	m := decodeParams(old)
	maps.Copy(m, decodeParams(update))
	out, _ := json.Marshal(m)
	return out
}

// Services implements domain.ServiceBroker.
func (b *apiBroker) Services(context.Context) ([]domain.Service, error) {
	b.calls.Add(1)
	return []domain.Service{{
		ID:                   apiServiceID,
		Name:                 apiServiceName,
		Description:          "An in-memory service written with brokerapi.",
		Bindable:             true,
		InstancesRetrievable: true,
		BindingsRetrievable:  true,
		PlanUpdatable:        true,
		Tags:                 []string{"brokerapi", "in-memory"},
		Metadata:             &domain.ServiceMetadata{DisplayName: "API Sample", ProviderDisplayName: "e2e"},
		Plans: []domain.ServicePlan{
			{
				ID: apiPlanSyncID, Name: apiPlanSyncName, Description: "Everything happens within the request.",
				Free: domain.FreeValue(true), Bindable: domain.BindableValue(true),
				Metadata: &domain.ServicePlanMetadata{DisplayName: "Small", Bullets: []string{"synchronous"}},
			},
			{
				ID: apiPlanAsyncID, Name: apiPlanAsyncName, Description: "Operations take a while.",
				Free: domain.FreeValue(false), Bindable: domain.BindableValue(true),
				MaximumPollingDuration: new(600),
			},
		},
	}}, nil
}

// Provision implements domain.ServiceBroker.
func (b *apiBroker) Provision(_ context.Context, id string, d domain.ProvisionDetails, async bool) (domain.ProvisionedServiceSpec, error) {
	b.calls.Add(1)
	params, err := canonicalJSON(d.RawParameters)
	if err != nil {
		return domain.ProvisionedServiceSpec{}, err
	}
	if d.ServiceID != apiServiceID {
		return domain.ProvisionedServiceSpec{}, errAPIWrongService
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now, dash := b.now(), apiDashboard(id)
	if in := b.instance(id, now); in.exists() {
		same := in.serviceID == d.ServiceID && in.planID == d.PlanID && in.org == d.OrganizationGUID &&
			in.space == d.SpaceGUID && bytes.Equal(in.params, params)
		switch {
		case in.op.busy() && in.op.kind != apiOpProvision:
			return domain.ProvisionedServiceSpec{}, errAPIConcurrency
		case !same:
			return domain.ProvisionedServiceSpec{}, apiresponses.ErrInstanceAlreadyExists
		case in.op.busy():
			return domain.ProvisionedServiceSpec{IsAsync: true, DashboardURL: dash, OperationData: in.op.id}, nil
		}
		return domain.ProvisionedServiceSpec{AlreadyExists: true, DashboardURL: dash}, nil
	}
	in := &apiInstance{serviceID: d.ServiceID, planID: d.PlanID, org: d.OrganizationGUID, space: d.SpaceGUID, params: params}
	if isAPIAsyncPlan(d.PlanID) {
		if !async {
			return domain.ProvisionedServiceSpec{}, apiresponses.ErrAsyncRequired
		}
		in.op = b.newOp(apiOpProvision, now)
		b.instances[id] = in
		return domain.ProvisionedServiceSpec{IsAsync: true, DashboardURL: dash, OperationData: in.op.id}, nil
	}
	in.live = true
	b.instances[id] = in
	return domain.ProvisionedServiceSpec{DashboardURL: dash}, nil
}

// Deprovision implements domain.ServiceBroker.
func (b *apiBroker) Deprovision(_ context.Context, id string, d domain.DeprovisionDetails, async bool) (domain.DeprovisionServiceSpec, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	switch {
	case !in.exists():
		return domain.DeprovisionServiceSpec{}, apiresponses.ErrInstanceDoesNotExist
	case in.op.busy() && in.op.kind == apiOpDeprovision:
		return domain.DeprovisionServiceSpec{IsAsync: true, OperationData: in.op.id}, nil
	case in.op.busy():
		return domain.DeprovisionServiceSpec{}, errAPIConcurrency
	case d.ServiceID != in.serviceID || d.PlanID != in.planID:
		return domain.DeprovisionServiceSpec{}, errAPIWrongService
	case isAPIAsyncPlan(in.planID):
		if !async {
			return domain.DeprovisionServiceSpec{}, apiresponses.ErrAsyncRequired
		}
		in.op = b.newOp(apiOpDeprovision, now)
		return domain.DeprovisionServiceSpec{IsAsync: true, OperationData: in.op.id}, nil
	}
	delete(b.instances, id)
	return domain.DeprovisionServiceSpec{}, nil
}

// GetInstance implements domain.ServiceBroker.
func (b *apiBroker) GetInstance(_ context.Context, id string, _ domain.FetchInstanceDetails) (domain.GetInstanceDetailsSpec, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	in := b.instance(id, b.now())
	switch {
	case !in.exists() || !in.live:
		return domain.GetInstanceDetailsSpec{}, errAPIInstanceNotFound
	case in.op.busy() && in.op.kind == apiOpUpdate:
		return domain.GetInstanceDetailsSpec{}, apiresponses.ErrConcurrentInstanceAccess
	}
	return domain.GetInstanceDetailsSpec{
		ServiceID: in.serviceID, PlanID: in.planID, DashboardURL: apiDashboard(id), Parameters: decodeParams(in.params),
	}, nil
}

// Update implements domain.ServiceBroker.
func (b *apiBroker) Update(_ context.Context, id string, d domain.UpdateDetails, async bool) (domain.UpdateServiceSpec, error) {
	b.calls.Add(1)
	params, err := canonicalJSON(d.RawParameters)
	if err != nil {
		return domain.UpdateServiceSpec{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	switch {
	case !in.exists() || !in.live:
		return domain.UpdateServiceSpec{}, errAPIInstanceNotFound
	case in.op.busy():
		return domain.UpdateServiceSpec{}, errAPIConcurrency
	case d.ServiceID != in.serviceID:
		return domain.UpdateServiceSpec{}, errAPIWrongService
	}
	target := in.planID
	if d.PlanID != "" {
		target = d.PlanID
	}
	if target != apiPlanSyncID && target != apiPlanAsyncID {
		return domain.UpdateServiceSpec{}, errAPIWrongService
	}
	merged := mergeParams(in.params, params)
	if isAPIAsyncPlan(in.planID) || isAPIAsyncPlan(target) {
		if !async {
			return domain.UpdateServiceSpec{}, apiresponses.ErrAsyncRequired
		}
		in.op = b.newOp(apiOpUpdate, now)
		in.op.planID, in.op.params = target, merged
		return domain.UpdateServiceSpec{IsAsync: true, OperationData: in.op.id, DashboardURL: apiDashboard(id)}, nil
	}
	in.planID, in.params = target, merged
	return domain.UpdateServiceSpec{DashboardURL: apiDashboard(id)}, nil
}

// LastOperation implements domain.ServiceBroker.
func (b *apiBroker) LastOperation(_ context.Context, id string, d domain.PollDetails) (domain.LastOperation, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	switch {
	case in == nil:
		return domain.LastOperation{}, apiresponses.ErrInstanceDoesNotExist
	case d.OperationData != "" && (in.op == nil || in.op.id != d.OperationData):
		return domain.LastOperation{}, errAPIUnknownOperation
	}
	return in.op.lastOperation(now), nil
}
