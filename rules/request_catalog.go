package rules

import (
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// CatalogView is what the request and response rules read from a broker's
// catalog; *Index implements it. Implementations must be safe for concurrent
// use and must not change while a check runs (an Index never changes).
type CatalogView interface {
	// Service returns the service with the id, or nil.
	Service(id string) *osb.Service
	// Plan returns the service and plan a request names, or a 400
	// *osb.Error saying that the service is unknown or the plan is not one
	// of its plans.
	Plan(serviceID, planID string) (*osb.Service, *osb.Plan, error)
	// ParameterSchema returns the plan's compiled parameter schema of the
	// kind, or nil for none; a nil *CompiledSchema accepts anything.
	ParameterSchema(planID string, kind SchemaKind) *CompiledSchema
}

var _ CatalogView = (*Index)(nil)

// checkCatalog runs the catalog-aware request rules. It skips what the
// request does not name: a missing service_id or plan_id already has its
// own violation.
func checkCatalog(e Endpoint, req *Request, cat CatalogView, vs *violationList) {
	switch e {
	case Provision:
		if req.ServiceID == "" || req.PlanID == "" {
			return
		}
		_, p, err := cat.Plan(req.ServiceID, req.PlanID)
		if err != nil {
			vs.addError("request.catalog.plan", err)
			return
		}
		checkMaintenanceInfo(req.MaintenanceInfo, p, vs)
		checkParameters(cat, p, InstanceCreate, req, vs)
	case Bind:
		if req.ServiceID == "" || req.PlanID == "" {
			return
		}
		s, p, err := cat.Plan(req.ServiceID, req.PlanID)
		if err != nil {
			vs.addError("request.catalog.plan", err)
			return
		}
		if !osb.PlanBindable(s, p) {
			vs.add("request.catalog.not_bindable", fmt.Sprintf(
				"bind needs a bindable plan, got %s, which is not bindable in the broker's catalog", planName(s, p)))
		}
		checkParameters(cat, p, BindingCreate, req, vs)
	case Update:
		checkUpdateCatalog(req, cat, vs)
	}
}

// checkUpdateCatalog checks an update against the catalog. The gateway sees
// a plan change only where the platform says what the plan was
// (previous_values.plan_id, which Cloud Controller always sends): a plan_id
// without it may or may not change the plan, and passes. The previous plan
// may have left the catalog while instances remain; then nothing about it
// is checked.
func checkUpdateCatalog(req *Request, cat CatalogView, vs *violationList) {
	if req.ServiceID == "" {
		return
	}
	s := cat.Service(req.ServiceID)
	if s == nil {
		vs.add("request.catalog.service", fmt.Sprintf("service_id %s is not a service in the broker's catalog",
			quoteCut(req.ServiceID)))
		return
	}
	var prevID string
	if req.PreviousValues != nil {
		prevID = req.PreviousValues.PlanID
	}
	var prev, target *osb.Plan
	if prevID != "" {
		_, prev, _ = cat.Plan(req.ServiceID, prevID)
	}
	target = prev
	if req.PlanID != "" && req.PlanID != prevID {
		_, p, err := cat.Plan(req.ServiceID, req.PlanID)
		if err != nil {
			vs.addError("request.catalog.plan", err)
			return
		}
		target = p
		if prev != nil && !osb.PlanUpdateable(s, prev) {
			vs.add("request.catalog.plan_not_updateable", fmt.Sprintf(
				"plan_id changes from %s to %s, but %s is not plan_updateable in the broker's catalog",
				quoteCut(prevID), quoteCut(req.PlanID), planName(s, prev)))
		}
	} else if req.PlanID != "" {
		_, target, _ = cat.Plan(req.ServiceID, req.PlanID)
	}
	if target == nil {
		return
	}
	checkMaintenanceInfo(req.MaintenanceInfo, target, vs)
	checkParameters(cat, target, InstanceUpdate, req, vs)
}

// checkMaintenanceInfo compares the request's maintenance_info.version
// with the plan's in the catalog (OSB 2.15): a version the catalog does
// not have, or any version for a plan without maintenance_info, is a 422
// MaintenanceInfoConflict, telling the platform to fetch the catalog again.
func checkMaintenanceInfo(mi *osb.MaintenanceInfo, p *osb.Plan, vs *violationList) {
	if mi == nil || mi.Version == "" {
		return
	}
	var desc string
	switch {
	case p.MaintenanceInfo == nil:
		desc = fmt.Sprintf("maintenance_info must be absent, as plan %s (%s) has none in the broker's catalog, got version %s",
			quoteCut(p.ID), p.Name, quoteCut(mi.Version))
	case p.MaintenanceInfo.Version != mi.Version:
		desc = fmt.Sprintf("maintenance_info/version must be %s, the version of plan %s (%s) in the broker's catalog, got %s",
			quoteCut(p.MaintenanceInfo.Version), quoteCut(p.ID), p.Name, quoteCut(mi.Version))
	default:
		return
	}
	*vs = append(*vs, Violation{Rule: "request.maintenance_info.conflict", Status: http.StatusUnprocessableEntity,
		Code: osb.CodeMaintenanceInfoConflict, Description: desc})
}

// checkParameters validates the request's parameters against the plan's
// schema of the kind. Absent parameters are not checked; a parameters
// member of the wrong type already has its violation.
func checkParameters(cat CatalogView, p *osb.Plan, kind SchemaKind, req *Request, vs *violationList) {
	if req.Parameters == nil {
		return
	}
	if err := cat.ParameterSchema(p.ID, kind).Validate(req.Parameters); err != nil {
		vs.addError("request.parameters.schema", err)
	}
}

// planName names a plan and its service for a description:
// plan "p-1" (small) of service "s-1" (mysql).
func planName(s *osb.Service, p *osb.Plan) string {
	return fmt.Sprintf("plan %s (%s) of service %s (%s)", quoteCut(p.ID), p.Name, quoteCut(s.ID), s.Name)
}
