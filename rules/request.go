package rules

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// CheckRequest checks the body and query of a classified call against the
// rules of its endpoint at API version v, the version the platform sent,
// and, when cat is not nil, against the broker's catalog. It returns the
// decoded body for provision, update and bind (nil for the other endpoints,
// and when the body is not a JSON object) and the violations, in the order
// the rules ran; none means the request passes.
//
// The rules, by id:
//
//   - request.body.missing, request.body.syntax (with the byte offset),
//     request.body.not_object: a provision, update or bind body must be one
//     JSON object.
//   - request.body.duplicate_field: a top-level field sent twice.
//   - request.body.ambiguous_field: a top-level field that differs from an
//     OSB field only by case ("PLAN_ID"): a Go broker reads it as the field,
//     others ignore it, so the gateway could check one value while the
//     broker acts on another.
//   - request.<field>.type: a field of the wrong JSON type, such as
//     request.parameters.type or request.previous_values.plan_id.type;
//     context, parameters, bind_resource, previous_values and
//     maintenance_info must be objects. JSON null counts as absent, and so
//     does an empty maintenance_info.
//   - request.<field>.required: a required field missing or empty, per the
//     version-gate table (service_id, plan_id, organization_guid,
//     space_guid, app_guid at 2.1–2.5, maintenance_info.version).
//   - request.<field>.empty: from 2.12, an optional string sent empty.
//   - request.query.service_id.required, request.query.plan_id.required:
//     deprovision and unbind name the plan in the query.
//   - request.catalog.service, request.catalog.plan: a service or plan the
//     catalog does not have, or a plan of another service.
//   - request.catalog.not_bindable: a bind on a plan that is not bindable.
//   - request.catalog.plan_not_updateable: an update that changes the plan
//     away from a plan that is not plan_updateable.
//   - request.predecessor_binding_id.self: a bind whose
//     predecessor_binding_id (OSB 2.17) is its own binding id. Whether the
//     plan may be rotated is CheckRotation's to say.
//   - request.maintenance_info.conflict (422 MaintenanceInfoConflict): a
//     maintenance_info.version other than the plan's in the catalog.
//   - request.parameters.schema: parameters the plan's schema refuses.
//
// Fields a version does not define are left alone, and so are unknown
// fields: the specification tells receivers to ignore them. Deprovision and
// unbind are not checked against the catalog: a plan removed from it can
// still have instances the platform must be able to delete.
func CheckRequest(c Call, v osb.Version, body []byte, cat CatalogView) (*Request, []Violation) {
	switch c.Endpoint {
	case Provision, Update, Bind:
	case Deprovision, Unbind:
		var vs violationList
		checkQueryIDs(c, &vs)
		return nil, vs
	default:
		return nil, nil
	}
	fields, vs := decodeObject(c.Endpoint.String(), body)
	if fields == nil {
		return nil, vs
	}
	req, wrong := decodeFields(c.Endpoint, v, fields, &vs)
	checkRequired(c.Endpoint, v, req, wrong, &vs)
	checkPredecessorSelf(c, req, &vs)
	if cat != nil {
		checkCatalog(c.Endpoint, req, cat, &vs)
	}
	if len(vs) == 0 {
		return req, nil
	}
	return req, vs
}

// checkQueryIDs checks that a deprovision or unbind names its service and
// plan in the query ("service_id*", "plan_id*" in every version).
func checkQueryIDs(c Call, vs *violationList) {
	for _, q := range [...]struct{ name, value string }{{"service_id", c.ServiceID}, {"plan_id", c.PlanID}} {
		if q.value == "" {
			vs.add("request.query."+q.name+".required", fmt.Sprintf(
				"query parameter %s is required for %s, got none or an empty value",
				q.name, c.Endpoint.describe()))
		}
	}
}

// decodeObject decodes a request body that must be one JSON object into its
// members, keyed exactly as sent: encoding/json matches struct fields without
// regard to case, which would let "PLAN_ID" pass for "plan_id" here and not
// at the broker, so the body goes into a map. The values are slices of body.
// It reports why the body is no usable object (empty, not JSON, not an
// object) with a nil map, and a key that occurs twice with the map: brokers
// differ in which of the two values they read, so the gateway cannot vouch
// for either. Of duplicates, the map holds the last, as encoding/json does.
func decodeObject(what string, body []byte) (map[string]json.RawMessage, violationList) {
	var vs violationList
	start := jsonfast.SkipSpace(body, 0)
	switch {
	case start == len(body):
		vs.add("request.body.missing", fmt.Sprintf("%s needs a JSON object as its body, got an empty body", what))
		return nil, vs
	case !jsonfast.Valid(body):
		var syn *json.SyntaxError
		if err := json.Unmarshal(body, new(any)); errors.As(err, &syn) {
			vs.add("request.body.syntax", fmt.Sprintf("request body is not valid JSON at byte %d: %v", syn.Offset, err))
		} else {
			vs.add("request.body.syntax", fmt.Sprintf("request body is not valid JSON: %v", err))
		}
		return nil, vs
	case body[start] != '{':
		vs.add("request.body.not_object", fmt.Sprintf("request body must be a JSON object, got %s", valueKindOf(body)))
		return nil, vs
	}
	ms, _, _ := jsonfast.ObjectMembers(body, start)
	for _, key := range ms.DuplicateKeys(body) {
		vs.add("request.body.duplicate_field", fmt.Sprintf(
			"request body must have each field once, got %s more than once (brokers differ in which value they read)", quoteCut(key)))
	}
	for _, mb := range ms {
		key := mb.Key(body)
		if name, ok := caseVariant(key); ok {
			vs.add("request.body.ambiguous_field", fmt.Sprintf(
				"request body field %s differs from the OSB field %q only by case: brokers differ in whether they read it as %q (a Go broker does, last one winning), so the gateway cannot check it; send it as %q",
				quoteCut(key), name, name, name))
		}
	}
	return ms.Map(body), vs
}

// topLevelFields are the names of the top-level body fields of bodyFields.
var topLevelFields = func() []string {
	var names []string
	for _, f := range bodyFields {
		if parent, name := splitPath(f.path); parent == "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}()

// caseVariant reports whether key is not an OSB body field as sent but
// equals one under Unicode case folding ("PLAN_ID", "Parameters"), as
// encoding/json matches field names, and which.
func caseVariant(key string) (string, bool) {
	for _, name := range topLevelFields {
		if key != name && strings.EqualFold(key, name) {
			return name, true
		}
	}
	return "", false
}
