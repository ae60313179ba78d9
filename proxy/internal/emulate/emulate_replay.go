package emulate

import (
	"errors"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// replay answers a provision or bind that repeats one the inventory saw
// succeed, as the specification asks of a broker (emulate.idempotent): the
// same attributes get 200 and the recorded answer, other attributes 409
// Conflict; neither reaches the broker, so a broker that would create
// twice or answer 409 to an identical repeat cannot. Attributes compared:
// service and plan, organization and space (provision), app guid and
// bind_resource (bind), and parameters when the inventory keeps them
// (inventory.secrets: encrypted). A bind is replayed only when its
// credentials are stored; otherwise the broker answers the repeat. It
// reports whether it answered.
func (e emulation) replay(w http.ResponseWriter) bool {
	c, req := e.s.Call, e.s.Request
	if req == nil {
		req, _ = rules.CheckRequest(c, e.s.Version, e.s.Body, nil)
		if req == nil {
			return false
		}
	}
	if c.Endpoint == rules.Provision {
		return e.replayProvision(w, req)
	}
	return e.replayBind(w, req)
}

func (e emulation) replayProvision(w http.ResponseWriter, req *rules.Request) bool {
	c := e.s.Call
	in, err := e.iv.St.GetInstance(e.ctx, e.u.Name, c.InstanceID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		e.unavailable(w, err)
		return true
	case !exists(in.LastOperation, store.KindProvision):
		return false // a failed provision: the broker may try again
	}
	e.s.Emulated = EmulatedReplay
	differs := differ(
		attr{"service_id", req.ServiceID, in.ServiceID},
		attr{"plan_id", req.PlanID, in.PlanID},
		attr{"organization_guid", req.OrganizationGUID, in.OrganizationGUID},
		attr{"space_guid", req.SpaceGUID, in.SpaceGUID},
	)
	if differs == "" && e.iv.SealsFor(e.u) && !rules.SameJSON(req.Parameters, e.iv.Open(e.ctx, in.SealedParameters, "parameters", in.Broker, in.InstanceID, "")) {
		differs = "parameters"
	}
	if differs != "" {
		e.s.Fail(w, osb.Errorf(http.StatusConflict, "", "service instance %q already exists with another %s; a repeat of its provision must carry the same attributes", c.InstanceID, differs))
		return true
	}
	body := map[string]any{}
	if in.DashboardURL != "" {
		body["dashboard_url"] = in.DashboardURL
	}
	if in.Metadata != nil && !e.s.Version.Less(versionMetadata) {
		body["metadata"] = in.Metadata
	}
	core.WriteAnswer(w, http.StatusOK, body)
	return true
}

func (e emulation) replayBind(w http.ResponseWriter, req *rules.Request) bool {
	c := e.s.Call
	b, err := e.iv.St.GetBinding(e.ctx, e.u.Name, c.InstanceID, c.BindingID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return false
	case err != nil:
		e.unavailable(w, err)
		return true
	case !exists(b.LastOperation, store.KindBind):
		return false
	}
	differs := differ(
		attr{"service_id", req.ServiceID, b.ServiceID},
		attr{"plan_id", req.PlanID, b.PlanID},
		attr{"app_guid", rules.AppGUID(req), b.AppGUID},
	)
	if differs == "" && !rules.SameJSON(req.BindResource, b.BindResource) {
		differs = "bind_resource"
	}
	if differs == "" && e.iv.SealsFor(e.u) && !rules.SameJSON(req.Parameters, e.iv.Open(e.ctx, b.SealedParameters, "parameters", b.Broker, b.InstanceID, b.BindingID)) {
		differs = "parameters"
	}
	if differs != "" {
		e.s.Emulated = EmulatedReplay
		e.s.Fail(w, osb.Errorf(http.StatusConflict, "", "service binding %q already exists with another %s; a repeat of its bind must carry the same attributes", c.BindingID, differs))
		return true
	}
	creds := e.iv.Open(e.ctx, b.SealedCredentials, "credentials", b.Broker, b.InstanceID, b.BindingID)
	if creds == nil {
		return false // the answer cannot be repeated without its credentials: the broker answers
	}
	e.s.Emulated = EmulatedReplay
	core.WriteAnswer(w, http.StatusOK, bindingBody(b, nil, creds, e.s.Version))
	return true
}

// attr is one attribute of a repeated call: what came, what is recorded.
type attr struct{ name, got, recorded string }

// differ names the first attribute whose value came and differs from a
// recorded one; "" when none does (an attribute absent on either side is
// not compared).
func differ(attrs ...attr) string {
	for _, a := range attrs {
		if a.got != "" && a.recorded != "" && a.got != a.recorded {
			return a.name
		}
	}
	return ""
}

// gone answers 410 Gone to a deprovision or unbind of what the inventory
// never saw (emulate.gone: the inventory holds every instance of the
// broker), without reaching the broker. It reports whether it answered.
func (e emulation) gone(w http.ResponseWriter) bool {
	c := e.s.Call
	var err error
	if c.Endpoint == rules.Unbind {
		_, err = e.iv.St.GetBinding(e.ctx, e.u.Name, c.InstanceID, c.BindingID)
	} else {
		_, err = e.iv.St.GetInstance(e.ctx, e.u.Name, c.InstanceID)
	}
	switch {
	case err == nil:
		return false
	case !errors.Is(err, store.ErrNotFound):
		e.unavailable(w, err)
		return true
	}
	e.s.Emulated = EmulatedGone
	core.WriteAnswer(w, http.StatusGone, struct{}{})
	return true
}
