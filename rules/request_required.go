package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// The payload structs state, in validator tags, what each body requires;
// the requirements table below states from which version to which each
// `required` tag holds. They are filled from a decoded Request, so the
// validator only ever sees strings of the right JSON type.

// provisionPayload is the body of PUT /v2/service_instances/:instance_id.
type provisionPayload struct {
	ServiceID        string              `json:"service_id" validate:"required"`
	PlanID           string              `json:"plan_id" validate:"required"`
	OrganizationGUID string              `json:"organization_guid" validate:"required"`
	SpaceGUID        string              `json:"space_guid" validate:"required"`
	MaintenanceInfo  *maintenancePayload `json:"maintenance_info" validate:"omitnil"`
}

// updatePayload is the body of PATCH /v2/service_instances/:instance_id.
type updatePayload struct {
	ServiceID       string                 `json:"service_id" validate:"required"`
	PlanID          string                 `json:"plan_id" validate:"required"`
	PreviousValues  *previousValuesPayload `json:"previous_values" validate:"omitnil"`
	MaintenanceInfo *maintenancePayload    `json:"maintenance_info" validate:"omitnil"`
}

// previousValuesPayload is an update's previous_values.
type previousValuesPayload struct {
	MaintenanceInfo *maintenancePayload `json:"maintenance_info" validate:"omitnil"`
}

// bindPayload is the body of PUT .../service_bindings/:binding_id.
type bindPayload struct {
	ServiceID string `json:"service_id" validate:"required"`
	PlanID    string `json:"plan_id" validate:"required"`
	AppGUID   string `json:"app_guid" validate:"required"`
}

// maintenancePayload is a maintenance_info object (OSB 2.15): "version*".
type maintenancePayload struct {
	Version string `json:"version" validate:"required"`
}

// requirement is the window of versions in which a `required` tag holds
// for the endpoints in on; a zero until means every later version too.
type requirement struct {
	path         string
	on           endpointSet
	since, until osb.Version
}

// requirements is the version-gate table of required fields. A `required`
// tag without a row here never holds.
//
// organization_guid and space_guid stay required on provision in every
// 2.x version (from 2.13 on, context.organization_guid and
// context.space_guid satisfy them, see payloadOf): 2.12 added context and
// 2.13 deprecated the two "in favor of context", but the specification
// keeps them marked REQUIRED up to 2.17
// ("existing fields MUST NOT be removed" in a minor version), and Cloud
// Controller and the Kubernetes client still send them. context is required
// in no version. (The Cloud Foundry page for 2.9 marks context required and
// lists neither GUID; context did not exist before 2.12, so that page was
// rewritten later and is not followed here.) app_guid was required on bind
// from 2.1 until service keys came with 2.6. An update's plan_id was
// required up to 2.4 (the only field then); service_id joined the update
// body in 2.6.
var requirements = [...]requirement{
	{path: "service_id", on: endpointsOf(Provision, Bind), since: v2_0},
	{path: "service_id", on: updateOnly, since: v2_6},
	{path: "plan_id", on: endpointsOf(Provision, Bind), since: v2_0},
	{path: "plan_id", on: updateOnly, since: v2_0, until: v2_4},
	{path: "organization_guid", on: provisionOnly, since: v2_0},
	{path: "space_guid", on: provisionOnly, since: v2_0},
	{path: "app_guid", on: bindOnly, since: v2_1, until: v2_5},
	{path: "maintenance_info/version", on: instanceBody, since: v2_15},
	{path: "previous_values/maintenance_info/version", on: updateOnly, since: v2_15},
}

// requirementAt returns the requirement row for e and path at version v,
// or nil when the field is not required then.
func requirementAt(e Endpoint, v osb.Version, path string) *requirement {
	for i := range requirements {
		r := &requirements[i]
		if r.path == path && r.on.has(e) && v.AtLeast(r.since) && (r.until.IsZero() || !r.until.Less(v)) {
			return r
		}
	}
	return nil
}

// requiredAt reports whether the field at path is required for e at v.
func requiredAt(e Endpoint, v osb.Version, path string) bool {
	return requirementAt(e, v, path) != nil
}

// payloadValidator validates the payload structs, naming fields by their
// JSON names. It is built once; a *validator.Validate is safe for
// concurrent use, and its cache of struct metadata never changes a result.
var payloadValidator = func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		return name
	})
	return v
}()

// payloadPaths maps the struct namespace of every payload field
// ("provisionPayload.MaintenanceInfo.Version") to its JSON path
// ("maintenance_info/version").
var payloadPaths = func() map[string]string {
	m := make(map[string]string)
	for _, p := range []any{provisionPayload{}, updatePayload{}, bindPayload{}} {
		t := reflect.TypeOf(p)
		addPayloadPaths(m, t, t.Name(), "")
	}
	return m
}()

func addPayloadPaths(m map[string]string, t reflect.Type, ns, path string) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		fns, fpath := ns+"."+f.Name, name
		if path != "" {
			fpath = path + "/" + name
		}
		m[fns] = fpath
		if ft := f.Type; ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
			addPayloadPaths(m, ft.Elem(), fns, fpath)
		}
	}
}

// payloadOf returns the payload struct of e filled from req, or nil for an
// endpoint without a body.
func payloadOf(e Endpoint, v osb.Version, req *Request) any {
	switch e {
	case Provision:
		p := &provisionPayload{ServiceID: req.ServiceID, PlanID: req.PlanID,
			OrganizationGUID: req.OrganizationGUID, SpaceGUID: req.SpaceGUID,
			MaintenanceInfo: maintenanceOf(req.MaintenanceInfo)}
		if v.AtLeast(v2_13) {
			// 2.13 deprecated the two "in favor of context": a platform that
			// sends them only in context has sent them.
			org, space := contextGUIDs(req.Context)
			if p.OrganizationGUID == "" {
				p.OrganizationGUID = org
			}
			if p.SpaceGUID == "" {
				p.SpaceGUID = space
			}
		}
		return p
	case Update:
		p := &updatePayload{ServiceID: req.ServiceID, PlanID: req.PlanID,
			MaintenanceInfo: maintenanceOf(req.MaintenanceInfo)}
		if pv := req.PreviousValues; pv != nil {
			p.PreviousValues = &previousValuesPayload{MaintenanceInfo: maintenanceOf(pv.MaintenanceInfo)}
		}
		return p
	case Bind:
		return &bindPayload{ServiceID: req.ServiceID, PlanID: req.PlanID, AppGUID: req.AppGUID}
	}
	return nil
}

// contextGUIDs returns context.organization_guid and context.space_guid
// when they are strings.
func contextGUIDs(ctx json.RawMessage) (org, space string) {
	var c struct {
		Org   any `json:"organization_guid"`
		Space any `json:"space_guid"`
	}
	if len(ctx) == 0 || json.Unmarshal(ctx, &c) != nil {
		return "", ""
	}
	org, _ = c.Org.(string)
	space, _ = c.Space.(string)
	return org, space
}

func maintenanceOf(mi *osb.MaintenanceInfo) *maintenancePayload {
	if mi == nil {
		return nil
	}
	return &maintenancePayload{Version: mi.Version}
}

// checkRequired runs the validator over e's payload with the `required`
// tags in force at v, and records a violation for each field that is
// missing or empty. Fields in wrong already have a type violation.
func checkRequired(e Endpoint, v osb.Version, req *Request, wrong map[string]bool, vs *violationList) {
	p := payloadOf(e, v, req)
	if p == nil {
		return
	}
	err := payloadValidator.StructFiltered(p, func(ns []byte) bool {
		path, ok := payloadPaths[string(ns)]
		return ok && !parentPaths[path] && !requiredAt(e, v, path) // true skips the field
	})
	var fes validator.ValidationErrors
	if !errors.As(err, &fes) {
		if err != nil {
			vs.add("request.body.invalid", "request body cannot be checked: "+err.Error())
		}
		return
	}
	for _, fe := range fes {
		path := payloadPaths[fe.StructNamespace()]
		if wrong[path] {
			continue
		}
		vs.add(ruleID("request", path, fe.Tag()), requiredMessage(e, v, path, req))
	}
}

// requiredMessage words a failed `required` tag: what was expected and what
// came, with the version window when the requirement has one.
func requiredMessage(e Endpoint, v osb.Version, path string, req *Request) string {
	when := ""
	if r := requirementAt(e, v, path); r != nil && !r.until.IsZero() {
		when = fmt.Sprintf(" at API version %s (OSB %s to %s)", v, r.since, r.until)
	}
	if raw, ok := lookupPath(req.Fields, path); ok && !isNull(raw) {
		return fmt.Sprintf("%s must be a non-empty string%s, got %s", path, when, string(raw))
	}
	return fmt.Sprintf("%s is required%s, got none", path, when)
}

// lookupPath returns the raw value at path in the body's members.
func lookupPath(fields map[string]json.RawMessage, path string) (json.RawMessage, bool) {
	for {
		name, rest, nested := strings.Cut(path, "/")
		raw, ok := fields[name]
		if !ok || !nested {
			return raw, ok
		}
		fields = nil
		if err := json.Unmarshal(raw, &fields); err != nil {
			return nil, false
		}
		path = rest
	}
}
