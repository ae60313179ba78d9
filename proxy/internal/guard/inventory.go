package guard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/mutation"
	"github.com/osb-gateway/osb-gateway/internal/seal"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Inventory records in the store what the gateway saw succeed: instances
// and bindings, their last operation, and (for brokers with
// inventory.secrets: encrypted) their parameters and credentials sealed
// under the key file's keys. It writes from the guard's settle path, under
// the call's (or the polled operation's) lock, before the answer reaches
// the platform, so the platform's next call sees the record. A record the
// store refuses is logged and counted, never turned into a failed call:
// the inventory follows the traffic, it does not gate it.
type Inventory struct {
	St      store.Store
	keys    *seal.Keyring // nil: no key file; secrets are not kept
	now     func() time.Time
	Log     *slog.Logger
	Metrics *metrics.Metrics
}

// NewInventory builds the inventory of a Gateway; it loads the key file
// when the configuration names one.
func NewInventory(cfg *config.Config, st store.Store, now func() time.Time, log *slog.Logger, m *metrics.Metrics) (*Inventory, error) {
	iv := &Inventory{St: st, now: now, Log: log, Metrics: m}
	if f := cfg.Inventory.KeyFile; f != "" {
		k, err := seal.LoadFile(f)
		if err != nil {
			return nil, fmt.Errorf("inventory.key_file: %w", err)
		}
		iv.keys = k
	}
	return iv, nil
}

// Keeps reports whether the inventory records the broker's traffic.
func (iv *Inventory) Keeps(u *upstream.Upstream) bool { return iv != nil && !u.Cfg.Inventory.Disabled }

// SealsFor reports whether u's secrets are kept (sealed).
func (iv *Inventory) SealsFor(u *upstream.Upstream) bool {
	return iv.keys != nil && u.Cfg.Inventory.Secrets == config.SecretsEncrypted
}

// called records what a mutating call's answer, which the platform got,
// tells: a success (200/201) of a provision, update or bind is stored, a
// 202 stores the operation in progress, a deprovision or unbind that
// succeeded (200, or 410 Gone: nothing left) removes the record. It
// returns the store's error, which it has logged and counted.
//
// A malformed success (rules.Answer.Malformed: a 2xx whose body is no JSON
// object) changes nothing, whatever the endpoint: the platform cannot rely
// on it (Cloud Controller takes it as failed), and the broker may have
// done nothing (overview-broker's 200invalidjson), so a record would make
// the emulations answer for what may not exist, and a removal lose what
// may still be there. A well-formed success that breaks other rules
// (validation.responses: report passes it on) is recorded: the platform
// reads it as the success its status says, and the broker holds what it
// says it made; left out, the inventory would not name an instance the
// platform holds (and emulate.gone would answer its deprovision in the
// broker's place).
//
// cancel, when not nil, is the cancellation of a pending orphan that the
// call's success makes (see Guard.Answered): a provision's record takes it
// to the store in the same call (store.Store.PutInstanceCancelling) and
// marks it done; the caller sends whatever is not done itself.
func (iv *Inventory) called(ctx context.Context, s *core.Scope, status int, a rules.Answer, body []byte, cancel *orphanCancel) error {
	if !iv.Keeps(upstream.Of(s.Route)) || a.Malformed() {
		return nil
	}
	if mutation.DropInventoryWrite && status != http.StatusAccepted && (s.Call.Endpoint == rules.Provision || s.Call.Endpoint == rules.Bind) {
		return nil // broken on purpose (bench/campaign -mutation drop-inventory-write)
	}
	op := store.LastOperation{Kind: lockKind(s.Call.Endpoint), Status: status, Started: s.Lock.Lock.Started}
	switch {
	case status == http.StatusAccepted:
		op.State, op.Operation = store.StateInProgress, a.Operation
	case status == http.StatusOK || status == http.StatusCreated:
		op.State, op.Ended = store.StateSucceeded, iv.now()
	case status == http.StatusGone && (s.Call.Endpoint == rules.Deprovision || s.Call.Endpoint == rules.Unbind):
		op.State, op.Ended = store.StateSucceeded, iv.now()
	default:
		return nil // a refusal or failure changes nothing the broker holds
	}
	req := s.Request
	if req == nil && len(s.Body) > 0 { // validation.requests: off; read what is kept
		req, _ = rules.CheckRequest(s.Call, s.Version, s.Body, nil)
	}
	var err error
	switch s.Call.Endpoint {
	case rules.Provision:
		err = iv.putInstance(ctx, s, req, rules.ReadResult(body), op, cancel)
	case rules.Update:
		err = iv.updateInstance(ctx, s, req, rules.ReadResult(body), op, "")
	case rules.Bind:
		err = iv.putBinding(ctx, s, req, rules.ReadResult(body), op)
	case rules.Deprovision, rules.Unbind:
		if op.State == store.StateInProgress {
			// Not gone yet: the record stays, with the deletion in
			// progress, until a poll says it succeeded; one that fails
			// leaves the record whole.
			err = iv.setOperation(ctx, upstream.Of(s.Route).Name, s.Call.InstanceID, s.Call.BindingID, op)
			break
		}
		err = iv.Removed(ctx, upstream.Of(s.Route).Name, s.Call.InstanceID, s.Call.BindingID, op)
	}
	iv.failed(ctx, upstream.Of(s.Route).Name, s.Call, err)
	return err
}

// Polled records what a last_operation answer that ended the polled
// operation l tells: the outcome, and for a deprovision or unbind that
// succeeded, the record's removal.
func (iv *Inventory) Polled(ctx context.Context, s *core.Scope, l store.Lock, a rules.Answer) error {
	if !iv.Keeps(upstream.Of(s.Route)) {
		return nil
	}
	op := store.LastOperation{Kind: l.Kind, Operation: l.Operation, Status: a.Status, Started: l.Started, Ended: iv.now()}
	switch a.State {
	case rules.PollSucceeded, rules.PollGone:
		op.State = store.StateSucceeded
	default:
		op.State, op.Description = store.StateFailed, a.Description
	}
	u := upstream.Of(s.Route)
	var err error
	switch {
	case op.State == store.StateSucceeded && (l.Kind == store.KindDeprovision || l.Kind == store.KindUnbind):
		err = iv.Removed(ctx, u.Name, l.InstanceID, l.BindingID, op)
	case l.Kind == store.KindUpdate && op.State == store.StateSucceeded:
		err = iv.updateInstance(ctx, s, nil, rules.Result{}, op, l.PlanID)
	default:
		err = iv.setOperation(ctx, u.Name, l.InstanceID, l.BindingID, op)
	}
	iv.failed(ctx, u.Name, rules.Call{Endpoint: rules.LockedBy(l.Kind), InstanceID: l.InstanceID, BindingID: l.BindingID}, err)
	return err
}

// failed logs and counts a record the store did not take.
func (iv *Inventory) failed(ctx context.Context, broker string, c rules.Call, err error) {
	if err == nil {
		return
	}
	iv.Metrics.StoreError("inventory")
	iv.Log.LogAttrs(ctx, slog.LevelError, "inventory not updated; the call itself is unaffected",
		slog.String("broker", broker), slog.String("endpoint", c.Endpoint.String()),
		slog.String("instance_id", c.InstanceID), slog.String("binding_id", c.BindingID), slog.String("error", err.Error()))
}

// putInstance stores a provisioned (or provisioning) instance, whole, and
// cancel's orphan with it (if not nil). Its Created is left to the store:
// a provision repeated over a recorded one keeps the record's, read by
// the store in the step that replaces it (store.Inventory.PutInstance),
// so nothing that writes the record meanwhile (a reconcile, an import,
// another replica after the lock lapsed) can slip between a read here
// and the put.
func (iv *Inventory) putInstance(ctx context.Context, s *core.Scope, req *rules.Request, res rules.Result, op store.LastOperation,
	cancel *orphanCancel) error {
	u := upstream.Of(s.Route)
	in := store.Instance{Broker: u.Name, InstanceID: s.Call.InstanceID, Tenant: s.Tenant, LastOperation: op,
		DashboardURL: res.DashboardURL, Metadata: res.Metadata}
	if req != nil {
		in.ServiceID, in.PlanID, in.Context = req.ServiceID, req.PlanID, req.Context
		in.OrganizationGUID, in.SpaceGUID = req.OrganizationGUID, req.SpaceGUID
		in.MaintenanceInfo = object(req.Fields["maintenance_info"])
		if err := iv.sealInto(&in.SealedParameters, u, req.Parameters, "parameters", in.InstanceID, ""); err != nil {
			return err
		}
	}
	if cancel == nil {
		_, err := iv.St.PutInstance(ctx, in)
		return err
	}
	_, cancelled, err := iv.St.PutInstanceCancelling(ctx, in, cancel.id)
	cancel.done, cancel.cancelled = err == nil, cancelled
	return err
}

// updateInstance applies an update to the recorded instance (creating one
// for an instance the gateway never saw provisioned): the request's plan,
// context, maintenance_info and parameters when req is set, else planID;
// the answer's dashboard_url and metadata; op.
func (iv *Inventory) updateInstance(ctx context.Context, s *core.Scope, req *rules.Request, res rules.Result, op store.LastOperation, planID string) error {
	u := upstream.Of(s.Route)
	id := s.Call.InstanceID
	in, err := iv.St.GetInstance(ctx, u.Name, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		in = store.Instance{Broker: u.Name, InstanceID: id, Tenant: s.Tenant}
	case err != nil:
		return err
	}
	in.LastOperation, in.Updated = op, time.Time{}
	if in.Tenant == "" {
		in.Tenant = s.Tenant // adopted: a record of nobody's is the first caller's (proxy/internal/owner/owner.go)
	}
	if op.State != store.StateSucceeded {
		_, err = iv.St.PutInstance(ctx, in)
		return err
	}
	if req != nil {
		planID = req.PlanID
		if req.ServiceID != "" {
			in.ServiceID = req.ServiceID
		}
		if req.Context != nil {
			in.Context = req.Context
		}
		if mi := object(req.Fields["maintenance_info"]); mi != nil {
			in.MaintenanceInfo = mi
		}
		if req.Parameters != nil {
			if err := iv.sealInto(&in.SealedParameters, u, req.Parameters, "parameters", id, ""); err != nil {
				return err
			}
		}
	}
	if planID != "" {
		in.PlanID = planID
	}
	if res.DashboardURL != "" {
		in.DashboardURL = res.DashboardURL
	}
	if res.Metadata != nil {
		in.Metadata = res.Metadata
	}
	_, err = iv.St.PutInstance(ctx, in)
	return err
}

// putBinding stores a created (or creating) binding, whole.
func (iv *Inventory) putBinding(ctx context.Context, s *core.Scope, req *rules.Request, res rules.Result, op store.LastOperation) error {
	u := upstream.Of(s.Route)
	b := store.Binding{Broker: u.Name, InstanceID: s.Call.InstanceID, BindingID: s.Call.BindingID, Tenant: s.Tenant,
		LastOperation: op, SyslogDrainURL: res.SyslogDrainURL, RouteServiceURL: res.RouteServiceURL,
		VolumeMounts: res.VolumeMounts, Endpoints: res.Endpoints, ExpiresAt: res.ExpiresAt, RenewBefore: res.RenewBefore}
	if req != nil {
		b.ServiceID, b.PlanID, b.AppGUID, b.BindResource = req.ServiceID, req.PlanID, rules.AppGUID(req), req.BindResource
		if err := iv.sealInto(&b.SealedParameters, u, req.Parameters, "parameters", b.InstanceID, b.BindingID); err != nil {
			return err
		}
	}
	if err := iv.sealInto(&b.SealedCredentials, u, res.Credentials, "credentials", b.InstanceID, b.BindingID); err != nil {
		return err
	}
	_, err := iv.St.PutBinding(ctx, b) // a bind repeated keeps the record's Created, as putInstance
	return err
}

// Removed deletes an instance (and its bindings) or a binding the broker
// no longer holds; a record already gone is no error.
func (iv *Inventory) Removed(ctx context.Context, broker, instanceID, bindingID string, op store.LastOperation) error {
	var err error
	if mutation.KeepDeleted && bindingID == "" {
		return nil // broken on purpose (bench/campaign -mutation keep-deleted)
	}
	if bindingID != "" {
		err = iv.St.DeleteBinding(ctx, broker, instanceID, bindingID)
	} else {
		_, err = iv.St.DeleteInstance(ctx, broker, instanceID)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	return err
}

// setOperation records op as the last operation of the instance or
// binding, creating a bare record when there is none (an operation the
// gateway saw start before it kept an inventory).
func (iv *Inventory) setOperation(ctx context.Context, broker, instanceID, bindingID string, op store.LastOperation) error {
	if bindingID != "" {
		b, err := iv.St.GetBinding(ctx, broker, instanceID, bindingID)
		if errors.Is(err, store.ErrNotFound) {
			b = store.Binding{Broker: broker, InstanceID: instanceID, BindingID: bindingID}
		} else if err != nil {
			return err
		}
		b.LastOperation, b.Updated = op, time.Time{}
		_, err = iv.St.PutBinding(ctx, b)
		return err
	}
	in, err := iv.St.GetInstance(ctx, broker, instanceID)
	if errors.Is(err, store.ErrNotFound) {
		in = store.Instance{Broker: broker, InstanceID: instanceID}
	} else if err != nil {
		return err
	}
	in.LastOperation, in.Updated = op, time.Time{}
	_, err = iv.St.PutInstance(ctx, in)
	return err
}

// sealInto seals secret (parameters or credentials) into *dst when the
// broker keeps secrets, bound to what it belongs to; otherwise, and for an
// absent secret, *dst stays empty.
func (iv *Inventory) sealInto(dst *[]byte, u *upstream.Upstream, secret json.RawMessage, what, instanceID, bindingID string) error {
	if len(secret) == 0 || !iv.SealsFor(u) {
		return nil
	}
	sealed, err := iv.keys.Seal(secret, secretAD(what, u.Name, instanceID, bindingID))
	if err != nil {
		return err
	}
	*dst = sealed
	return nil
}

// Open opens a sealed secret of a record; nil when none is stored or the
// keys cannot open it (logged: a key missing from the key file).
func (iv *Inventory) Open(ctx context.Context, sealed []byte, what, broker, instanceID, bindingID string) json.RawMessage {
	if len(sealed) == 0 || iv.keys == nil {
		return nil
	}
	plain, err := iv.keys.Open(sealed, secretAD(what, broker, instanceID, bindingID))
	if err != nil {
		iv.Log.LogAttrs(ctx, slog.LevelError, "a stored secret cannot be opened; answered without it",
			slog.String("broker", broker), slog.String("instance_id", instanceID), slog.String("binding_id", bindingID),
			slog.String("secret", what), slog.String("error", err.Error()))
		return nil
	}
	return plain
}

// secretAD is the additional data a sealed secret is bound to: what it is
// and whose, so that a blob moved to another record does not open.
func secretAD(what, broker, instanceID, bindingID string) []byte {
	return []byte(what + "\x00" + broker + "\x00" + instanceID + "\x00" + bindingID)
}

// object is raw when it is a non-empty JSON object, else nil.
func object(raw json.RawMessage) json.RawMessage {
	if len(raw) < 2 || raw[0] != '{' || string(raw) == "{}" {
		return nil
	}
	return raw
}

// lockKind is the store's kind of a mutating endpoint's operation.
func lockKind(e rules.Endpoint) string {
	k, _ := rules.LockKind(e)
	return k
}
