package samplebroker

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// provisionRequest is the body of PUT /v2/service_instances/:instance_id.
type provisionRequest struct {
	ServiceID        string           `json:"service_id"`
	PlanID           string           `json:"plan_id"`
	OrganizationGUID string           `json:"organization_guid"`
	SpaceGUID        string           `json:"space_guid"`
	Context          json.RawMessage  `json:"context"`
	Parameters       json.RawMessage  `json:"parameters"`
	MaintenanceInfo  *maintenanceInfo `json:"maintenance_info"`
}

// updateRequest is the body of PATCH /v2/service_instances/:instance_id.
type updateRequest struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id"`
	Context         json.RawMessage  `json:"context"`
	Parameters      json.RawMessage  `json:"parameters"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info"`
}

// instanceJSON is the body of GET /v2/service_instances/:instance_id.
type instanceJSON struct {
	ServiceID       string           `json:"service_id"`
	PlanID          string           `json:"plan_id"`
	DashboardURL    string           `json:"dashboard_url,omitempty"`
	Parameters      json.RawMessage  `json:"parameters,omitempty"`
	MaintenanceInfo *maintenanceInfo `json:"maintenance_info,omitempty"`
}

// dashboardURL is the made-up dashboard of an instance.
func dashboardURL(instanceID string) string {
	return "https://sample-broker.invalid/dashboard/" + instanceID
}

// reply is a response decided under a shard lock and written after it is
// released, so that slow clients never hold a lock.
type reply struct {
	status int
	raw    []byte // written as is when set
	value  any    // marshalled otherwise
	op     string // the id of the asynchronous operation a 202 stands for
}

func (rp reply) write(w http.ResponseWriter) error {
	if rp.op != "" {
		if cw, ok := w.(*callWriter); ok {
			cw.op = rp.op
		}
	}
	if rp.raw != nil {
		writeJSON(w, rp.status, rp.raw)
		return nil
	}
	return writeValue(w, rp.status, rp.value)
}

// accepted is the 202 reply for operation o.
func (b *Broker) accepted(o *operation, dashboard string) reply {
	v := asyncJSON{DashboardURL: dashboard}
	if !b.opts.Legacy {
		v.Operation = o.id
	}
	return reply{status: http.StatusAccepted, value: v, op: o.id}
}

// checkObject requires an optional field to be a JSON object when present.
func checkObject(name string, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || raw[0] == '{' {
		return nil
	}
	return osb.Errorf(http.StatusBadRequest, "", "%s must be a JSON object", name)
}

func (b *Broker) provision(w http.ResponseWriter, r *http.Request, c call) error {
	var req provisionRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	p, err := b.lookupPlan(req.ServiceID, req.PlanID, "body")
	if err != nil {
		return err
	}
	if b.opts.Legacy && !b.opts.Lax && (req.OrganizationGUID == "" || req.SpaceGUID == "") {
		return osb.Errorf(http.StatusBadRequest, "", "organization_guid and space_guid are required")
	}
	if err := checkObject("context", req.Context); err != nil {
		return err
	}
	params, m, err := canonicalParams(req.Parameters)
	if err == nil {
		err = checkParams(p, m)
	}
	if err == nil {
		err = b.checkMaintenance(p, req.MaintenanceInfo)
	}
	if err != nil {
		return err
	}
	want := &instance{plan: p, org: req.OrganizationGUID, space: req.SpaceGUID, params: params}
	sh := b.store.lock(c.instanceID)
	rp, err := b.provisionLocked(sh, want, r, c)
	if err == nil {
		err = b.persist(sh, c.instanceID)
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) provisionLocked(sh *shard, want *instance, r *http.Request, c call) (reply, error) {
	dashboard := asyncJSON{DashboardURL: dashboardURL(c.instanceID)}
	in := sh.get(c.instanceID, c.now)
	if b.opts.Lax && in != nil && !in.op.busy() {
		in = nil // created again
	}
	if in != nil && !in.deleted && (in.live || in.op.busy()) {
		same := in.plan == want.plan && in.org == want.org && in.space == want.space && bytes.Equal(in.params, want.params)
		switch {
		case in.op.busy() && in.op.kind != opProvision:
			return reply{}, b.concurrencyError(c)
		case !same:
			return reply{}, osb.Errorf(http.StatusConflict, "", "service instance %s already exists with other attributes", c.instanceID)
		case in.op.busy():
			return b.accepted(in.op, dashboard.DashboardURL), nil
		}
		return reply{status: http.StatusOK, value: dashboard}, nil
	}
	if want.plan.async {
		if !acceptsIncomplete(r) {
			return reply{}, errAsyncRequired
		}
		want.op = b.newOperation(opProvision, c.now, c.failOp)
		sh.instances[c.instanceID] = want
		return b.accepted(want.op, dashboard.DashboardURL), nil
	}
	want.live = true
	sh.instances[c.instanceID] = want
	return reply{status: http.StatusCreated, value: dashboard}, nil
}

func (b *Broker) update(w http.ResponseWriter, r *http.Request, c call) error {
	var req updateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.ServiceID == "" {
		return osb.Errorf(http.StatusBadRequest, "", "service_id is missing from the body")
	}
	var target *planDef
	if req.PlanID != "" {
		p, err := b.lookupPlan(req.ServiceID, req.PlanID, "body")
		if err != nil {
			return err
		}
		target = p
	} else if b.defs.services[req.ServiceID] == nil {
		return osb.Errorf(http.StatusBadRequest, "", "service_id %q names no service in the catalog", req.ServiceID)
	}
	if err := checkObject("context", req.Context); err != nil {
		return err
	}
	_, m, err := canonicalParams(req.Parameters)
	if err != nil {
		return err
	}
	sh := b.store.lock(c.instanceID)
	rp, err := b.updateLocked(sh, &req, target, m, r, c)
	if err == nil {
		err = b.persist(sh, c.instanceID)
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) updateLocked(sh *shard, req *updateRequest, target *planDef, m map[string]any, r *http.Request, c call) (reply, error) {
	in := sh.get(c.instanceID, c.now)
	switch {
	case in == nil || in.deleted || !in.live && !in.op.busy():
		return reply{}, errInstanceNotFound
	case in.op.busy():
		return reply{}, b.concurrencyError(c)
	case in.plan.service.id != req.ServiceID:
		return reply{}, osb.Errorf(http.StatusBadRequest, "", "service_id %q is not the instance's service", req.ServiceID)
	}
	if target == nil {
		target = in.plan
	}
	if target != in.plan && !in.plan.service.updateable {
		return reply{}, osb.Errorf(http.StatusUnprocessableEntity, "", "service %s does not support plan changes", in.plan.service.name)
	}
	if err := b.checkMaintenance(target, req.MaintenanceInfo); err != nil {
		return reply{}, err
	}
	if err := checkParams(target, m); err != nil {
		return reply{}, err
	}
	params, err := mergeParams(in.params, m)
	if err != nil {
		return reply{}, err
	}
	if in.plan.async || target.async {
		if !acceptsIncomplete(r) {
			return reply{}, errAsyncRequired
		}
		in.op = b.newOperation(opUpdate, c.now, c.failOp)
		in.op.plan, in.op.params = target, params
		return b.accepted(in.op, ""), nil
	}
	in.plan, in.params, in.op = target, params, nil
	return reply{status: http.StatusOK, raw: emptyObject}, nil
}

// mergeParams overlays the top-level keys of an update's parameters on the
// instance's.
func mergeParams(old []byte, update map[string]any) ([]byte, error) {
	if len(update) == 0 {
		return old, nil
	}
	merged := make(map[string]any, len(update))
	if old != nil {
		if err := json.Unmarshal(old, &merged); err != nil {
			return nil, err
		}
	}
	for k, v := range update {
		merged[k] = v
	}
	return json.Marshal(merged)
}

func (b *Broker) deprovision(w http.ResponseWriter, r *http.Request, c call) error {
	if _, err := b.queryPlan(r); err != nil {
		return err
	}
	sh := b.store.lock(c.instanceID)
	rp, err := b.deprovisionLocked(sh, r, c)
	if err == nil {
		err = b.persist(sh, c.instanceID)
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) deprovisionLocked(sh *shard, r *http.Request, c call) (reply, error) {
	in := sh.get(c.instanceID, c.now)
	switch {
	case (in == nil || in.deleted) && b.opts.Lax:
		return reply{status: http.StatusOK, raw: emptyObject}, nil
	case in == nil || in.deleted:
		return reply{status: http.StatusGone, raw: emptyObject}, nil
	case in.op.busy() && in.op.kind == opDeprovision:
		return b.accepted(in.op, ""), nil
	case in.op.busy():
		return reply{}, b.concurrencyError(c)
	case !in.live: // a failed provision: nothing to take down
		delete(sh.instances, c.instanceID)
		return reply{status: http.StatusOK, raw: emptyObject}, nil
	case in.plan.async:
		if !acceptsIncomplete(r) {
			return reply{}, errAsyncRequired
		}
		in.op = b.newOperation(opDeprovision, c.now, c.failOp)
		return b.accepted(in.op, ""), nil
	}
	delete(sh.instances, c.instanceID)
	return reply{status: http.StatusOK, raw: emptyObject}, nil
}

func (b *Broker) getInstance(w http.ResponseWriter, c call) error {
	sh := b.store.lock(c.instanceID)
	rp, err := b.getInstanceLocked(sh, c)
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) getInstanceLocked(sh *shard, c call) (reply, error) {
	in := sh.get(c.instanceID, c.now)
	switch {
	case in == nil || !in.live:
		// Also while provisioning is in progress, as the specification asks.
		return reply{}, errInstanceNotFound
	case in.op.busy() && in.op.kind == opUpdate:
		return reply{}, errConcurrency
	}
	v := instanceJSON{
		ServiceID: in.plan.service.id, PlanID: in.plan.id,
		DashboardURL: dashboardURL(c.instanceID), Parameters: in.params,
	}
	if in.plan.maint != "" {
		v.MaintenanceInfo = &maintenanceInfo{Version: in.plan.maint}
	}
	if v.Parameters == nil {
		v.Parameters = json.RawMessage(emptyObject[:2])
	}
	return reply{status: http.StatusOK, value: v}, nil
}

// instanceLastOperation is a hot path: the body is precomputed, nothing is
// marshalled.
func (b *Broker) instanceLastOperation(w http.ResponseWriter, r *http.Request, c call) error {
	sh := b.store.lock(c.instanceID)
	in := sh.get(c.instanceID, c.now)
	var o *operation
	if in != nil {
		o = in.op
	}
	gone := in != nil && in.deleted
	body, inProgress := b.lastOpBody(o, c.now)
	sh.mu.Unlock()
	return b.answerLastOperation(w, r, in != nil, gone, o, body, inProgress, errInstanceNotFound)
}
