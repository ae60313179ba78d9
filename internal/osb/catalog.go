package osb

import "encoding/json"

// Catalog is the body of GET /v2/catalog.
type Catalog struct {
	Services []Service `json:"services"`
}

// Service is one catalog service offering.
type Service struct {
	ID                   string           `json:"id"`
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	Tags                 []string         `json:"tags,omitempty"`
	Requires             []string         `json:"requires,omitempty"`
	Bindable             bool             `json:"bindable"`
	InstancesRetrievable bool             `json:"instances_retrievable,omitempty"`
	BindingsRetrievable  bool             `json:"bindings_retrievable,omitempty"`
	AllowContextUpdates  bool             `json:"allow_context_updates,omitempty"`
	PlanUpdateable       bool             `json:"plan_updateable,omitempty"`
	Metadata             json.RawMessage  `json:"metadata,omitempty"`
	DashboardClient      *DashboardClient `json:"dashboard_client,omitempty"`
	Plans                []Plan           `json:"plans"`
}

// DashboardClient is a service's OAuth dashboard client (Cloud Foundry).
type DashboardClient struct {
	ID          string `json:"id"`
	Secret      string `json:"secret"`
	RedirectURI string `json:"redirect_uri,omitempty"`
}

// Plan is one plan of a service. Bindable and PlanUpdateable override the
// service's values when set (OSB 2.10+ and 2.13+); BindingRotatable is the
// plan's alone (OSB 2.17).
type Plan struct {
	ID                     string           `json:"id"`
	Name                   string           `json:"name"`
	Description            string           `json:"description"`
	Metadata               json.RawMessage  `json:"metadata,omitempty"`
	Free                   *bool            `json:"free,omitempty"`
	Bindable               *bool            `json:"bindable,omitempty"`
	BindingRotatable       *bool            `json:"binding_rotatable,omitempty"`
	PlanUpdateable         *bool            `json:"plan_updateable,omitempty"`
	Schemas                *Schemas         `json:"schemas,omitempty"`
	MaximumPollingDuration *int             `json:"maximum_polling_duration,omitempty"`
	MaintenanceInfo        *MaintenanceInfo `json:"maintenance_info,omitempty"`
}

// Schemas holds a plan's JSON Schemas for parameters (OSB 2.13+).
type Schemas struct {
	ServiceInstance *InstanceSchemas `json:"service_instance,omitempty"`
	ServiceBinding  *BindingSchemas  `json:"service_binding,omitempty"`
}

// InstanceSchemas are the schemas for provision and update parameters.
type InstanceSchemas struct {
	Create *InputSchema `json:"create,omitempty"`
	Update *InputSchema `json:"update,omitempty"`
}

// BindingSchemas are the schemas for bind parameters.
type BindingSchemas struct {
	Create *InputSchema `json:"create,omitempty"`
}

// InputSchema wraps one JSON Schema document, kept as raw bytes.
type InputSchema struct {
	Parameters json.RawMessage `json:"parameters,omitempty"`
}

// MaintenanceInfo is a plan's maintenance version (OSB 2.15+).
type MaintenanceInfo struct {
	Version     string `json:"version"`
	Description string `json:"description,omitempty"`
}

// PlanBindable reports whether plan p of service s is bindable: the plan's
// own value when set, else the service's.
func PlanBindable(s *Service, p *Plan) bool {
	if p.Bindable != nil {
		return *p.Bindable
	}
	return s.Bindable
}

// PlanUpdateable reports whether plan p of service s may be changed by an
// update: the plan's own value when set, else the service's.
func PlanUpdateable(s *Service, p *Plan) bool {
	if p.PlanUpdateable != nil {
		return *p.PlanUpdateable
	}
	return s.PlanUpdateable
}

// PlanBindingRotatable reports whether a binding of plan p may be rotated
// (a bind with predecessor_binding_id, OSB 2.17): the plan's
// binding_rotatable, false when absent.
func PlanBindingRotatable(p *Plan) bool {
	return p.BindingRotatable != nil && *p.BindingRotatable
}
