package rules

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/osb-gateway/osb-gateway/internal/jsonfast"
	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// responseField is one field of a success body the gateway checks: the
// JSON type it must have when present (null counts as absent), from which
// version on the endpoints define it, and the catalog "requires" permission
// the service needs for the broker to send it.
type responseField struct {
	name     string
	typ      valueType
	on       endpointSet
	since    osb.Version
	requires string
	// rule names the field in rule ids when its name alone is ambiguous.
	rule string
}

var (
	bindingAnswer  = endpointsOf(Bind, GetBinding)
	lastOperations = endpointsOf(InstanceLastOperation, BindingLastOperation)
	v2_9           = osb.Version{Major: 2, Minor: 9}
)

// responseFields is the table of success-body fields. syslog_drain_url is
// in the 2.1 document, route_service_url came with 2.8, volume_mounts with
// 2.9 (experimental until 2.10), operation with 2.9 for instances and 2.14
// for bindings, and an update's dashboard_url with 2.14.
var responseFields = [...]responseField{
	{name: "dashboard_url", typ: typeString, on: endpointsOf(Provision, GetInstance), since: v2_0},
	{name: "dashboard_url", typ: typeString, on: updateOnly, since: v2_14},
	{name: "operation", typ: typeString, on: endpointsOf(Provision, Update, Deprovision), since: v2_9},
	{name: "operation", typ: typeString, on: endpointsOf(Bind, Unbind), since: v2_14},
	{name: "credentials", typ: typeObject, on: bindingAnswer, since: v2_0},
	{name: "syslog_drain_url", typ: typeString, on: bindingAnswer, since: v2_0, requires: RequireSyslogDrain},
	{name: "route_service_url", typ: typeString, on: bindingAnswer, since: v2_8, requires: RequireRouteForwarding},
	{name: "volume_mounts", typ: typeArray, on: bindingAnswer, since: v2_9, requires: RequireVolumeMount},
	{name: "description", typ: typeString, on: lastOperations, since: v2_0, rule: "last_operation/description"},
}

// MaxOperationLength is the most characters an "operation" may have
// (OSB 2.15).
const MaxOperationLength = 10000

// operationLengthSince is the version that limits "operation".
var operationLengthSince = v2_15

// lastOperationStates are the values of a last_operation "state".
var lastOperationStates = []string{"in progress", "succeeded", "failed"}

// checkSuccessBody checks the fields of a 2xx body.
func checkSuccessBody(c Call, v osb.Version, status int, body []byte, fields jsonfast.Object,
	cat CatalogView, opts ResponseOptions, vs *violationList) {
	e := c.Endpoint
	for i := range responseFields {
		f := &responseFields[i]
		if !f.on.has(e) || v.Less(f.since) {
			continue
		}
		raw, ok := fields.Get(body, f.name)
		if !ok || isNull(raw) {
			continue
		}
		if typeOf(raw) != f.typ {
			rule := f.name
			if f.rule != "" {
				rule = f.rule
			}
			vs.addResponse(ruleID("response", rule, "type"), fmt.Sprintf("%s in the broker's %s answer to %s must be %s, got %s",
				f.name, describeStatus(status), e.describe(), f.typ, valueKindOf(raw)))
			continue
		}
		switch f.name {
		case "operation":
			checkOperationLength(v, raw, vs)
		case "dashboard_url":
			checkAbsoluteURL(f.name, raw, vs)
		}
		if f.requires != "" {
			checkRequires(c, f, cat, opts, vs)
		}
	}
	if lastOperations.has(e) && status == http.StatusOK {
		state, _ := fields.Get(body, "state")
		checkState(state, vs)
	}
	if e == Bind && status == http.StatusAccepted {
		if raw, ok := fields.Get(body, "credentials"); ok && !isNull(raw) {
			vs.addResponse("response.bind.async_credentials",
				"the broker's 202 Accepted answer to PUT binding must not have credentials (an asynchronous bind returns them "+
					"when the binding is fetched), got credentials")
		}
	}
}

// checkOperationLength checks that an operation has at most
// MaxOperationLength characters, from 2.15 on.
func checkOperationLength(v osb.Version, raw json.RawMessage, vs *violationList) {
	if v.Less(operationLengthSince) {
		return
	}
	s := jsonfast.Unquote(bytes.TrimSpace(raw))
	if n := utf8.RuneCountInString(s); n > MaxOperationLength {
		vs.addResponse("response.operation.length", fmt.Sprintf(
			"operation must have at most %d characters (OSB 2.15), got %d", MaxOperationLength, n))
	}
}

// checkAbsoluteURL checks that a URL field holds an absolute URL with a
// host.
func checkAbsoluteURL(name string, raw json.RawMessage, vs *violationList) {
	s := jsonfast.Unquote(bytes.TrimSpace(raw))
	u, err := url.Parse(s)
	if err == nil && u.IsAbs() && u.Host != "" {
		return
	}
	vs.addResponse(ruleID("response", name, "absolute"), fmt.Sprintf(
		"%s must be an absolute URL such as \"https://dashboard.example.com/instances/1\", got %s", name, quoteCut(s)))
}

// checkRequires checks that the service of a binding lists the permission
// its answer's field needs in "requires"; Cloud Controller refuses the
// answer otherwise. The service comes from the request's service_id, or the
// call's query; unknown services are the catalog rules' to report.
func checkRequires(c Call, f *responseField, cat CatalogView, opts ResponseOptions, vs *violationList) {
	if cat == nil {
		return
	}
	id := c.ServiceID
	if opts.Request != nil && opts.Request.ServiceID != "" {
		id = opts.Request.ServiceID
	}
	s := cat.Service(id)
	if s == nil || slices.Contains(s.Requires, f.requires) {
		return
	}
	has := "none"
	if len(s.Requires) > 0 {
		has = `["` + strings.Join(s.Requires, `", "`) + `"]`
	}
	vs.addResponse("response.bind.requires", fmt.Sprintf(
		"%s needs %q in the \"requires\" of service %s (%s) in the broker's catalog, got %s",
		f.name, f.requires, quoteCut(s.ID), s.Name, has))
}

// checkState checks a last_operation answer's "state".
func checkState(raw json.RawMessage, vs *violationList) {
	want := `"in progress", "succeeded" or "failed"`
	switch {
	case raw == nil || isNull(raw):
		vs.addResponse("response.last_operation.state", "state is required in a last_operation answer and must be "+want+", got none")
	case typeOf(raw) != typeString:
		vs.addResponse("response.last_operation.state", fmt.Sprintf("state must be %s, got %s", want, valueKindOf(raw)))
	default:
		tok := bytes.TrimSpace(raw)
		if bytes.IndexByte(tok, '\\') < 0 {
			switch string(tok[1 : len(tok)-1]) { // compared without a copy
			case "in progress", "succeeded", "failed":
				return
			}
		}
		if s := jsonfast.Unquote(tok); !slices.Contains(lastOperationStates, s) {
			vs.addResponse("response.last_operation.state", fmt.Sprintf("state must be %s, got %s", want, quoteCut(s)))
		}
	}
}
