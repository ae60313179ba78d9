package samplebroker

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// bindRequest is the body of PUT .../service_bindings/:binding_id.
type bindRequest struct {
	ServiceID    string          `json:"service_id"`
	PlanID       string          `json:"plan_id"`
	AppGUID      string          `json:"app_guid"`
	BindResource json.RawMessage `json:"bind_resource"`
	Context      json.RawMessage `json:"context"`
	Parameters   json.RawMessage `json:"parameters"`
}

// bindResource is the part of bind_resource the broker looks at.
type bindResource struct {
	AppGUID string `json:"app_guid"`
}

// bindingJSON is the body of bind's 200/201 and of GET binding.
type bindingJSON struct {
	Credentials json.RawMessage `json:"credentials"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
}

// credentialsJSON are the made-up credentials of a binding.
type credentialsJSON struct {
	URI      string `json:"uri"`
	Username string `json:"username"`
	Password string `json:"password"`
}

// newCredentials makes fresh credentials for a binding of instanceID.
func newCredentials(instanceID string) json.RawMessage {
	var buf [20]byte
	_, _ = rand.Read(buf[:])
	user := "u-" + hex.EncodeToString(buf[:4])
	pass := hex.EncodeToString(buf[4:])
	creds, _ := json.Marshal(credentialsJSON{
		URI:      "sample://" + user + ":" + pass + "@sample-broker.invalid/" + instanceID,
		Username: user,
		Password: pass,
	})
	return creds
}

// v2_14 is the version that brought asynchronous bindings.
var v2_14 = osb.Version{Major: 2, Minor: 14}

// asyncBinding reports whether a bind or unbind on plan p runs
// asynchronously: the async plan, a platform that accepts it at OSB 2.14 or
// later, and not in legacy mode.
func (b *Broker) asyncBinding(p *planDef, r *http.Request, c call) bool {
	return p.async && !b.opts.Legacy && c.version.AtLeast(v2_14) && acceptsIncomplete(r)
}

// asyncRequired reports whether a bind or unbind on plan p must be refused
// with 422 AsyncRequired: Options.AsyncOnlyBindings, at OSB 2.14 and
// later, without accepts_incomplete=true.
func (b *Broker) asyncRequired(p *planDef, r *http.Request, c call) bool {
	return b.opts.AsyncOnlyBindings && p.async && !b.opts.Legacy && c.version.AtLeast(v2_14) && !acceptsIncomplete(r)
}

func (b *Broker) bind(w http.ResponseWriter, r *http.Request, c call) error {
	var req bindRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	p, err := b.lookupPlan(req.ServiceID, req.PlanID, "body")
	if err != nil {
		return err
	}
	if !p.service.bindable {
		return osb.Errorf(http.StatusBadRequest, "", "service %s is not bindable", p.service.name)
	}
	if err := checkObject("context", req.Context); err != nil {
		return err
	}
	if err := checkObject("bind_resource", req.BindResource); err != nil {
		return err
	}
	if len(req.BindResource) > 0 {
		var res bindResource
		if err := json.Unmarshal(req.BindResource, &res); err != nil {
			return osb.Errorf(http.StatusBadRequest, "", "bind_resource is not valid: %v", err)
		}
		if res.AppGUID != "" {
			req.AppGUID = res.AppGUID
		}
	}
	params, _, err := canonicalParams(req.Parameters)
	if err != nil {
		return err
	}
	want := &binding{appGUID: req.AppGUID, params: params, creds: newCredentials(c.instanceID)}
	sh := b.store.lock(c.instanceID)
	rp, err := b.bindLocked(sh, req.ServiceID, want, r, c)
	if err == nil {
		err = b.persist(sh, c.instanceID)
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) bindLocked(sh *shard, serviceID string, want *binding, r *http.Request, c call) (reply, error) {
	in := sh.get(c.instanceID, c.now)
	switch {
	case in == nil || in.deleted || !in.live && !in.op.busy():
		return reply{}, errInstanceNotFound
	case in.op.busy():
		return reply{}, b.concurrencyError(c)
	case in.plan.service.id != serviceID:
		return reply{}, osb.Errorf(http.StatusBadRequest, "", "service_id %q is not the instance's service", serviceID)
	}
	if bd := in.bindings[c.bindingID]; bd != nil {
		bd.settle(c.now)
		if !bd.deleted && (bd.live || bd.op.busy()) && !(b.opts.Lax && !bd.op.busy()) {
			same := bd.appGUID == want.appGUID && bytes.Equal(bd.params, want.params)
			switch {
			case bd.op.busy() && bd.op.kind != opBind:
				return reply{}, b.concurrencyError(c)
			case !same:
				return reply{}, osb.Errorf(http.StatusConflict, "", "service binding %s already exists with other attributes", c.bindingID)
			case bd.op.busy():
				return b.accepted(bd.op, ""), nil
			}
			return reply{status: http.StatusOK, value: bindingJSON{Credentials: bd.creds}}, nil
		}
	}
	if b.asyncRequired(in.plan, r, c) {
		return reply{}, errAsyncRequired
	}
	if in.bindings == nil {
		in.bindings = make(map[string]*binding)
	}
	in.bindings[c.bindingID] = want
	if b.asyncBinding(in.plan, r, c) {
		want.op = b.newOperation(opBind, c.now, c.failOp)
		return b.accepted(want.op, ""), nil
	}
	want.live = true
	return reply{status: http.StatusCreated, value: bindingJSON{Credentials: want.creds}}, nil
}

func (b *Broker) unbind(w http.ResponseWriter, r *http.Request, c call) error {
	if _, err := b.queryPlan(r); err != nil {
		return err
	}
	sh := b.store.lock(c.instanceID)
	rp, err := b.unbindLocked(sh, r, c)
	if err == nil {
		err = b.persist(sh, c.instanceID)
	}
	sh.mu.Unlock()
	if err != nil {
		return err
	}
	return rp.write(w)
}

func (b *Broker) unbindLocked(sh *shard, r *http.Request, c call) (reply, error) {
	gone := reply{status: http.StatusGone, raw: emptyObject}
	if b.opts.Lax {
		gone.status = http.StatusOK
	}
	in := sh.get(c.instanceID, c.now)
	if in == nil || in.deleted {
		return gone, nil
	}
	bd := in.bindings[c.bindingID]
	if bd != nil {
		bd.settle(c.now)
	}
	switch {
	case bd == nil || bd.deleted:
		return gone, nil
	case bd.op.busy() && bd.op.kind == opUnbind:
		return b.accepted(bd.op, ""), nil
	case bd.op.busy() || in.op.busy():
		return reply{}, b.concurrencyError(c)
	case !bd.live: // a failed bind
		delete(in.bindings, c.bindingID)
		return gone, nil
	case b.asyncRequired(in.plan, r, c):
		return reply{}, errAsyncRequired
	case b.asyncBinding(in.plan, r, c):
		bd.op = b.newOperation(opUnbind, c.now, c.failOp)
		return b.accepted(bd.op, ""), nil
	}
	delete(in.bindings, c.bindingID)
	return reply{status: http.StatusOK, raw: emptyObject}, nil
}

func (b *Broker) getBinding(w http.ResponseWriter, c call) error {
	sh := b.store.lock(c.instanceID)
	var v bindingJSON
	in := sh.get(c.instanceID, c.now)
	var bd *binding
	if in != nil && in.live {
		bd = in.bindings[c.bindingID]
	}
	if bd != nil {
		bd.settle(c.now)
	}
	found := bd != nil && bd.live // not while the bind is in progress
	if found {
		v = bindingJSON{Credentials: bd.creds, Parameters: bd.params}
	}
	sh.mu.Unlock()
	if !found {
		return errBindingNotFound
	}
	return writeValue(w, http.StatusOK, v)
}

// bindingLastOperation is a hot path like instanceLastOperation.
func (b *Broker) bindingLastOperation(w http.ResponseWriter, r *http.Request, c call) error {
	sh := b.store.lock(c.instanceID)
	in := sh.get(c.instanceID, c.now)
	var bd *binding
	if in != nil {
		bd = in.bindings[c.bindingID]
	}
	var o *operation
	if bd != nil {
		bd.settle(c.now)
		o = bd.op
	}
	gone := bd != nil && bd.deleted
	body, inProgress := b.lastOpBody(o, c.now)
	sh.mu.Unlock()
	return b.answerLastOperation(w, r, bd != nil, gone, o, body, inProgress, errBindingNotFound)
}
