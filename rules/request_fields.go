package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Request is the decoded body of a provision, update or bind request, as
// CheckRequest read it; later stages (the operation guard, bridging, audit)
// reuse it instead of decoding the body again.
//
// A field is set only when the request carried it with the right JSON type
// and the request's API version defines it: a maintenance_info sent at 2.14
// is an extension field the gateway leaves alone. JSON null counts as
// absent. Fields holds every top-level member as sent, known or not. The
// raw JSON values are slices of the body CheckRequest read, which must not
// change while the Request is in use.
type Request struct {
	// ServiceID and PlanID are service_id and plan_id (on an update,
	// plan_id is the plan to move to, or empty for no change).
	ServiceID string
	PlanID    string
	// OrganizationGUID and SpaceGUID are the provision's top-level
	// organization_guid and space_guid.
	OrganizationGUID string
	SpaceGUID        string
	// AppGUID is the bind's top-level app_guid.
	AppGUID string
	// PredecessorBindingID is the bind's predecessor_binding_id (OSB
	// 2.17): the binding this bind rotates.
	PredecessorBindingID string
	// Context, Parameters and BindResource are the raw JSON objects
	// context, parameters and bind_resource, nil when absent.
	Context      json.RawMessage
	Parameters   json.RawMessage
	BindResource json.RawMessage
	// PreviousValues is the update's previous_values; nil when absent.
	PreviousValues *PreviousValues
	// MaintenanceInfo is nil when absent and when empty ({}), which the
	// gateway reads as absent. Only Version is decoded: the specification
	// ignores every other member.
	MaintenanceInfo *osb.MaintenanceInfo
	// Fields holds the top-level members of the body as sent.
	Fields map[string]json.RawMessage
}

// PreviousValues is the previous_values object of an update: the instance
// before the update, as the platform remembers it.
type PreviousValues struct {
	// ServiceID and PlanID are the instance's service and plan before the
	// update.
	ServiceID string
	PlanID    string
	// MaintenanceInfo is the instance's maintenance_info before the update
	// (OSB 2.15), nil when absent or empty.
	MaintenanceInfo *osb.MaintenanceInfo
}

// valueType is the JSON type a body field must have.
type valueType uint8

const (
	typeString valueType = iota + 1
	typeObject
	typeArray
	typeBool
)

// String names the type for descriptions.
func (t valueType) String() string {
	switch t {
	case typeObject:
		return "a JSON object"
	case typeArray:
		return "a JSON array"
	case typeBool:
		return "a boolean (true or false)"
	}
	return "a string"
}

// endpointSet is a set of endpoints.
type endpointSet uint16

// endpointsOf returns the set of es.
func endpointsOf(es ...Endpoint) endpointSet {
	var s endpointSet
	for _, e := range es {
		s |= 1 << e
	}
	return s
}

// has reports whether e is in the set.
func (s endpointSet) has(e Endpoint) bool { return e < 16 && s&(1<<e) != 0 }

// API versions the request rules name.
var (
	v2_1  = osb.Version{Major: 2, Minor: 1}
	v2_4  = osb.Version{Major: 2, Minor: 4}
	v2_5  = osb.Version{Major: 2, Minor: 5}
	v2_6  = osb.Version{Major: 2, Minor: 6}
	v2_8  = osb.Version{Major: 2, Minor: 8}
	v2_12 = osb.Version{Major: 2, Minor: 12}
	v2_13 = osb.Version{Major: 2, Minor: 13}
	v2_15 = osb.Version{Major: 2, Minor: 15}
	v2_16 = osb.Version{Major: 2, Minor: 16}
)

var (
	provisionOnly = endpointsOf(Provision)
	updateOnly    = endpointsOf(Update)
	bindOnly      = endpointsOf(Bind)
	instanceBody  = endpointsOf(Provision, Update)
	anyBody       = endpointsOf(Provision, Update, Bind)
)

// bodyField is one field of a request body the gateway checks: where it is,
// the JSON type it must have when present, and from which version on the
// specification defines it for those endpoints. Requests of older versions
// leave it unchecked: to them it is an extension field, which receivers must
// ignore.
type bodyField struct {
	path  string // "/"-separated: "previous_values/plan_id"
	typ   valueType
	on    endpointSet
	since osb.Version
	// emptyIsAbsent makes an empty object count as absent.
	emptyIsAbsent bool
}

// bodyFields is the table of body fields, parents before their members.
// Versions are those of the specification documents: org and space GUIDs
// since 2.0, app_guid since 2.1, parameters since 2.5 (absent from 2.4,
// present in 2.8), bind_resource and previous_values since 2.8, context on
// provision and update since 2.12 and on bind since 2.13, maintenance_info
// since 2.15.
var bodyFields = [...]bodyField{
	{path: "service_id", typ: typeString, on: anyBody, since: v2_0},
	{path: "plan_id", typ: typeString, on: anyBody, since: v2_0},
	{path: "organization_guid", typ: typeString, on: provisionOnly, since: v2_0},
	{path: "space_guid", typ: typeString, on: provisionOnly, since: v2_0},
	{path: "app_guid", typ: typeString, on: bindOnly, since: v2_1},
	{path: "parameters", typ: typeObject, on: anyBody, since: v2_5},
	{path: "context", typ: typeObject, on: instanceBody, since: v2_12},
	{path: "context", typ: typeObject, on: bindOnly, since: v2_13},
	{path: "predecessor_binding_id", typ: typeString, on: bindOnly, since: v2_17},
	{path: "bind_resource", typ: typeObject, on: bindOnly, since: v2_8},
	{path: "bind_resource/app_guid", typ: typeString, on: bindOnly, since: v2_8},
	{path: "bind_resource/route", typ: typeString, on: bindOnly, since: v2_8},
	{path: "previous_values", typ: typeObject, on: updateOnly, since: v2_8},
	{path: "previous_values/service_id", typ: typeString, on: updateOnly, since: v2_8},
	{path: "previous_values/plan_id", typ: typeString, on: updateOnly, since: v2_8},
	{path: "previous_values/organization_id", typ: typeString, on: updateOnly, since: v2_8},
	{path: "previous_values/space_id", typ: typeString, on: updateOnly, since: v2_8},
	{path: "previous_values/maintenance_info", typ: typeObject, on: updateOnly, since: v2_15, emptyIsAbsent: true},
	{path: "previous_values/maintenance_info/version", typ: typeString, on: updateOnly, since: v2_15},
	{path: "maintenance_info", typ: typeObject, on: instanceBody, since: v2_15, emptyIsAbsent: true},
	{path: "maintenance_info/version", typ: typeString, on: instanceBody, since: v2_15},
}

// parentPaths are the object fields whose members bodyFields names; only
// they are decoded into members.
var parentPaths = func() map[string]bool {
	m := make(map[string]bool)
	for _, f := range bodyFields {
		if parent, _ := splitPath(f.path); parent != "" {
			m[parent] = true
		}
	}
	return m
}()

// splitPath splits "a/b/c" into "a/b" and "c"; a top-level path has parent "".
func splitPath(path string) (parent, name string) {
	i := strings.LastIndexByte(path, '/')
	if i < 0 {
		return "", path
	}
	return path[:i], path[i+1:]
}

// nonEmptySince is the version from which a string field, if present, must
// not be empty ("Request and response parameters of type string, if present,
// MUST be a non-empty string", OSB 2.12).
var nonEmptySince = v2_12

// decodeFields reads the fields of bodyFields that endpoint e defines at
// version v from the body's members into a Request, recording a violation
// for each field of the wrong JSON type (and, from 2.12, each present but
// empty string the requirements do not already cover). It returns the
// paths of the fields with the wrong type, which the requirement check
// skips.
func decodeFields(e Endpoint, v osb.Version, fields map[string]json.RawMessage, vs *violationList) (*Request, map[string]bool) {
	req := &Request{Fields: fields}
	objects := map[string]map[string]json.RawMessage{"": fields}
	var wrong map[string]bool
	for i := range bodyFields {
		f := &bodyFields[i]
		if !f.on.has(e) || v.Less(f.since) {
			continue
		}
		parent, name := splitPath(f.path)
		obj, ok := objects[parent]
		if !ok {
			continue // the parent is absent, null, empty or of the wrong type
		}
		raw, ok := obj[name]
		if !ok || isNull(raw) {
			continue
		}
		if typeOf(raw) != f.typ {
			vs.add(ruleID("request", f.path, "type"), fmt.Sprintf("%s must be %s, got %s",
				f.path, f.typ, valueKindOf(raw)))
			if wrong == nil {
				wrong = make(map[string]bool)
			}
			wrong[f.path] = true
			continue
		}
		var s string
		if f.typ == typeString {
			s = jsonfast.Unquote(bytes.TrimSpace(raw))
			if s == "" && v.AtLeast(nonEmptySince) && !requiredAt(e, v, f.path) {
				vs.add(ruleID("request", f.path, "empty"), fmt.Sprintf(
					"%s must be a non-empty string when present (OSB 2.12 and later), got \"\"", f.path))
			}
		} else if parentPaths[f.path] || f.emptyIsAbsent {
			raw = bytes.TrimSpace(raw)
			ms, _, _ := jsonfast.ObjectMembers(raw, 0) // a valid object: the body decoded
			if len(ms) == 0 && f.emptyIsAbsent {
				continue
			}
			objects[f.path] = ms.Map(raw)
		}
		assign(req, f.path, raw, s)
	}
	return req, wrong
}

// assign stores one decoded field in req; s is the value of a string field.
func assign(req *Request, path string, raw json.RawMessage, s string) {
	switch path {
	case "service_id":
		req.ServiceID = s
	case "plan_id":
		req.PlanID = s
	case "organization_guid":
		req.OrganizationGUID = s
	case "space_guid":
		req.SpaceGUID = s
	case "app_guid":
		req.AppGUID = s
	case "predecessor_binding_id":
		req.PredecessorBindingID = s
	case "parameters":
		req.Parameters = raw
	case "context":
		req.Context = raw
	case "bind_resource":
		req.BindResource = raw
	case "previous_values":
		req.PreviousValues = &PreviousValues{}
	case "previous_values/service_id":
		req.PreviousValues.ServiceID = s
	case "previous_values/plan_id":
		req.PreviousValues.PlanID = s
	case "previous_values/maintenance_info":
		req.PreviousValues.MaintenanceInfo = &osb.MaintenanceInfo{}
	case "previous_values/maintenance_info/version":
		req.PreviousValues.MaintenanceInfo.Version = s
	case "maintenance_info":
		req.MaintenanceInfo = &osb.MaintenanceInfo{}
	case "maintenance_info/version":
		req.MaintenanceInfo.Version = s
	}
}

// isNull reports whether raw is the JSON null.
func isNull(raw []byte) bool {
	i := jsonfast.SkipSpace(raw, 0)
	return len(raw) >= i+4 && string(raw[i:i+4]) == "null"
}

// typeOf returns the valueType of raw, or 0 for other JSON types.
func typeOf(raw []byte) valueType {
	i := jsonfast.SkipSpace(raw, 0)
	if i >= len(raw) {
		return 0
	}
	switch raw[i] {
	case '"':
		return typeString
	case '{':
		return typeObject
	case '[':
		return typeArray
	case 't', 'f':
		return typeBool
	}
	return 0
}
