package e2e

import (
	"bytes"
	"context"
	"fmt"

	"code.cloudfoundry.org/brokerapi/v13/domain"
	"code.cloudfoundry.org/brokerapi/v13/domain/apiresponses"
)

// Bind implements domain.ServiceBroker.
func (b *apiBroker) Bind(_ context.Context, id, bindingID string, d domain.BindDetails, async bool) (domain.Binding, error) {
	b.calls.Add(1)
	params, err := canonicalJSON(d.RawParameters)
	if err != nil {
		return domain.Binding{}, err
	}
	app := d.AppGUID
	if d.BindResource != nil && d.BindResource.AppGuid != "" {
		app = d.BindResource.AppGuid
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	switch {
	case !in.exists():
		return domain.Binding{}, apiresponses.ErrInstanceDoesNotExist // brokerapi answers 404
	case in.op.busy():
		return domain.Binding{}, errAPIConcurrency
	case d.ServiceID != in.serviceID:
		return domain.Binding{}, errAPIWrongService
	}
	if bd := in.bindings[bindingID]; bd != nil {
		bd.settle(now)
		if !bd.deleted && (bd.live || bd.op.busy()) {
			same := bd.appGUID == app && bytes.Equal(bd.params, params)
			switch {
			case bd.op.busy() && bd.op.kind != apiOpBind:
				return domain.Binding{}, errAPIConcurrency
			case !same:
				return domain.Binding{}, apiresponses.ErrBindingAlreadyExists
			case bd.op.busy():
				return domain.Binding{IsAsync: true, OperationData: bd.op.id}, nil
			}
			return domain.Binding{AlreadyExists: true, Credentials: bd.creds}, nil
		}
	}
	if isAPIAsyncPlan(in.planID) && !async && b.asyncOnlyBinds {
		return domain.Binding{}, apiresponses.ErrAsyncRequired
	}
	b.seq++
	user := "u-" + bindingID
	pass := fmt.Sprintf("p%06d", b.seq)
	bd := &apiBinding{appGUID: app, params: params, creds: map[string]any{
		"uri":      "api://" + user + ":" + pass + "@api-broker.invalid/" + id,
		"username": user,
		"password": pass,
	}}
	if in.bindings == nil {
		in.bindings = make(map[string]*apiBinding)
	}
	in.bindings[bindingID] = bd
	if isAPIAsyncPlan(in.planID) && async {
		bd.op = b.newOp(apiOpBind, now)
		return domain.Binding{IsAsync: true, OperationData: bd.op.id}, nil
	}
	bd.live = true
	return domain.Binding{Credentials: bd.creds}, nil
}

// Unbind implements domain.ServiceBroker.
func (b *apiBroker) Unbind(_ context.Context, id, bindingID string, _ domain.UnbindDetails, async bool) (domain.UnbindSpec, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	if !in.exists() {
		return domain.UnbindSpec{}, apiresponses.ErrInstanceDoesNotExist
	}
	bd := in.bindings[bindingID]
	if bd != nil {
		bd.settle(now)
	}
	switch {
	case bd == nil || bd.deleted || !bd.live && !bd.op.busy():
		return domain.UnbindSpec{}, apiresponses.ErrBindingDoesNotExist
	case bd.op.busy() && bd.op.kind == apiOpUnbind:
		return domain.UnbindSpec{IsAsync: true, OperationData: bd.op.id}, nil
	case bd.op.busy() || in.op.busy():
		return domain.UnbindSpec{}, errAPIConcurrency
	case isAPIAsyncPlan(in.planID) && !async && b.asyncOnlyBinds:
		return domain.UnbindSpec{}, apiresponses.ErrAsyncRequired
	case isAPIAsyncPlan(in.planID) && async:
		bd.op = b.newOp(apiOpUnbind, now)
		return domain.UnbindSpec{IsAsync: true, OperationData: bd.op.id}, nil
	}
	delete(in.bindings, bindingID)
	return domain.UnbindSpec{}, nil
}

// GetBinding implements domain.ServiceBroker.
func (b *apiBroker) GetBinding(_ context.Context, id, bindingID string, _ domain.FetchBindingDetails) (domain.GetBindingSpec, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	in := b.instance(id, now)
	if !in.exists() || !in.live {
		return domain.GetBindingSpec{}, apiresponses.ErrBindingNotFound
	}
	bd := in.bindings[bindingID]
	if bd != nil {
		bd.settle(now)
	}
	if bd == nil || !bd.live {
		return domain.GetBindingSpec{}, apiresponses.ErrBindingNotFound
	}
	return domain.GetBindingSpec{Credentials: bd.creds, Parameters: decodeParams(bd.params)}, nil
}

// LastBindingOperation implements domain.ServiceBroker.
func (b *apiBroker) LastBindingOperation(_ context.Context, id, bindingID string, d domain.PollDetails) (domain.LastOperation, error) {
	b.calls.Add(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.now()
	var bd *apiBinding
	if in := b.instance(id, now); in != nil {
		bd = in.bindings[bindingID]
	}
	if bd == nil {
		return domain.LastOperation{}, apiresponses.ErrBindingDoesNotExist
	}
	bd.settle(now)
	if d.OperationData != "" && (bd.op == nil || bd.op.id != d.OperationData) {
		return domain.LastOperation{}, errAPIUnknownOperation
	}
	return bd.op.lastOperation(now), nil
}
