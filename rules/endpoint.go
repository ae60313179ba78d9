package rules

import (
	"net/http"
	"slices"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Endpoint is one operation of the Open Service Broker API. The zero value is
// Unknown. Endpoints are few and fixed, so an Endpoint is safe to use as a
// span name, a metric label or a map key.
type Endpoint uint8

// The endpoints of the Open Service Broker API, in the order the specification
// presents them.
const (
	// Unknown is no OSB endpoint; Classify never returns it without an error.
	Unknown Endpoint = iota
	// Catalog is GET /v2/catalog.
	Catalog
	// Provision is PUT /v2/service_instances/:instance_id.
	Provision
	// Update is PATCH /v2/service_instances/:instance_id.
	Update
	// Deprovision is DELETE /v2/service_instances/:instance_id.
	Deprovision
	// GetInstance is GET /v2/service_instances/:instance_id (OSB 2.14).
	GetInstance
	// InstanceLastOperation is GET /v2/service_instances/:instance_id/last_operation.
	InstanceLastOperation
	// Bind is PUT /v2/service_instances/:instance_id/service_bindings/:binding_id.
	Bind
	// Unbind is DELETE /v2/service_instances/:instance_id/service_bindings/:binding_id.
	Unbind
	// GetBinding is GET /v2/service_instances/:instance_id/service_bindings/:binding_id
	// (OSB 2.14).
	GetBinding
	// BindingLastOperation is GET
	// /v2/service_instances/:instance_id/service_bindings/:binding_id/last_operation
	// (OSB 2.14).
	BindingLastOperation
)

// routeID names one path shape under /v2.
type routeID uint8

const (
	noRoute routeID = iota
	routeCatalog
	routeInstance
	routeInstanceLastOperation
	routeBinding
	routeBindingLastOperation
)

// Path parameters in route patterns.
const (
	instanceParam = ":instance_id"
	bindingParam  = ":binding_id"
)

// route is one path shape: its segments after "/v2/" (parameters as
// instanceParam and bindingParam) and the noun that names it to a person.
type route struct {
	segs []string
	noun string
}

// routes lists every path shape the API defines.
var routes = [...]route{
	noRoute:                    {noun: "unknown endpoint"},
	routeCatalog:               {segs: []string{"catalog"}, noun: "catalog"},
	routeInstance:              {segs: []string{"service_instances", instanceParam}, noun: "instance"},
	routeInstanceLastOperation: {segs: []string{"service_instances", instanceParam, "last_operation"}, noun: "instance last_operation"},
	routeBinding:               {segs: []string{"service_instances", instanceParam, "service_bindings", bindingParam}, noun: "binding"},
	routeBindingLastOperation:  {segs: []string{"service_instances", instanceParam, "service_bindings", bindingParam, "last_operation"}, noun: "binding last_operation"},
}

// maxSegments is the most segments after "/v2/" any route has.
const maxSegments = 5

// pattern is the route's path with parameter placeholders, e.g.
// /v2/service_instances/:instance_id/last_operation.
func (r routeID) pattern() string {
	return "/v2/" + strings.Join(routes[r].segs, "/")
}

// allow lists the methods the route accepts, sorted and comma-separated, as
// for an Allow header.
func (r routeID) allow() string {
	var ms []string
	for _, info := range endpoints {
		if info.route == r && r != noRoute {
			ms = append(ms, info.method)
		}
	}
	slices.Sort(ms)
	return strings.Join(ms, ", ")
}

// endpointInfo is everything the gateway knows about one endpoint that does
// not depend on the request.
type endpointInfo struct {
	name     string      // stable label: span names, metrics, logs
	method   string      // HTTP method
	route    routeID     // path shape
	mutating bool        // changes broker state
	catalog  bool        // CheckRequest checks it against the broker's catalog
	since    osb.Version // oldest API version with this endpoint
	// asyncSince, when set, is the oldest API version in which the endpoint
	// may be asynchronous (accepts_incomplete=true), if later than since.
	asyncSince osb.Version
}

var (
	v2_0  = osb.Version{Major: 2, Minor: 0}
	v2_14 = osb.Version{Major: 2, Minor: 14}
)

// endpoints is the endpoint table, indexed by Endpoint.
var endpoints = [...]endpointInfo{
	Unknown:               {name: "unknown"},
	Catalog:               {name: "catalog", method: http.MethodGet, route: routeCatalog, since: v2_0},
	Provision:             {name: "provision", method: http.MethodPut, route: routeInstance, mutating: true, catalog: true, since: v2_0},
	Update:                {name: "update", method: http.MethodPatch, route: routeInstance, mutating: true, catalog: true, since: v2_0},
	Deprovision:           {name: "deprovision", method: http.MethodDelete, route: routeInstance, mutating: true, since: v2_0},
	GetInstance:           {name: "get_instance", method: http.MethodGet, route: routeInstance, since: v2_14},
	InstanceLastOperation: {name: "instance_last_operation", method: http.MethodGet, route: routeInstanceLastOperation, since: v2_0},
	Bind:                  {name: "bind", method: http.MethodPut, route: routeBinding, mutating: true, catalog: true, since: v2_0, asyncSince: v2_14},
	Unbind:                {name: "unbind", method: http.MethodDelete, route: routeBinding, mutating: true, since: v2_0, asyncSince: v2_14},
	GetBinding:            {name: "get_binding", method: http.MethodGet, route: routeBinding, since: v2_14},
	BindingLastOperation:  {name: "binding_last_operation", method: http.MethodGet, route: routeBindingLastOperation, since: v2_14},
}

// info returns e's row of the endpoint table; out-of-range values get the
// Unknown row.
func (e Endpoint) info() *endpointInfo {
	if int(e) >= len(endpoints) {
		return &endpoints[Unknown]
	}
	return &endpoints[e]
}

// String returns the endpoint's stable, low-cardinality name, such as
// "provision" or "binding_last_operation"; "unknown" for Unknown and for
// values outside the defined set.
func (e Endpoint) String() string { return e.info().name }

// Mutating reports whether the endpoint changes state at the broker:
// provision, update, deprovision, bind and unbind.
func (e Endpoint) Mutating() bool { return e.info().mutating }

// ChecksCatalog reports whether CheckRequest checks the endpoint's calls
// against the broker's catalog (service and plan ids, bindable,
// plan_updateable, parameter schemas, maintenance_info): provision, update
// and bind. Deprovision and unbind are checked without it.
func (e Endpoint) ChecksCatalog() bool { return e.info().catalog }

// Instance reports whether the endpoint's path names a service instance, that
// is every endpoint but Catalog and Unknown.
func (e Endpoint) Instance() bool {
	return slices.Contains(routes[e.info().route].segs, instanceParam)
}

// Binding reports whether the endpoint's path names a service binding.
func (e Endpoint) Binding() bool {
	return slices.Contains(routes[e.info().route].segs, bindingParam)
}

// Since returns the oldest API version in which the endpoint exists: 2.14 for
// GetInstance, GetBinding and BindingLastOperation, 2.0 for the others, and
// the zero Version for Unknown.
func (e Endpoint) Since() osb.Version { return e.info().since }

// describe names the endpoint to a person by method and resource, such as
// "GET binding" or "PUT instance".
func (e Endpoint) describe() string {
	info := e.info()
	if info.route == noRoute {
		return routes[noRoute].noun
	}
	return info.method + " " + routes[info.route].noun
}

// CheckVersion reports whether call exists at API version v, the version the
// platform sent in X-Broker-API-Version. It returns a 412 *osb.Error naming
// the endpoint, the version that came and the version needed when
//   - the endpoint is newer than v (GET instance, GET binding and binding
//     last_operation need 2.14), or
//   - the call asks to be asynchronous (accepts_incomplete=true) and the
//     endpoint's asynchronous form is newer than v (bind and unbind need 2.14).
//
// An Unknown endpoint passes; Classify refuses those before.
func CheckVersion(c Call, v osb.Version) error {
	if need := RequiredVersion(c); v.Less(need) {
		return versionError(DescribeCall(c), need, v)
	}
	return nil
}

// RequiredVersion returns the oldest API version at which the call exists
// (2.14 for an asynchronous bind or unbind). It allocates nothing: it runs
// on every request.
func RequiredVersion(c Call) osb.Version {
	info := c.Endpoint.info()
	if c.AcceptsIncomplete && !info.asyncSince.IsZero() && info.since.Less(info.asyncSince) {
		return info.asyncSince
	}
	return info.since
}

// DescribeCall names the call for a person: "GET binding", or
// "asynchronous PUT binding (accepts_incomplete=true)" when the version it
// needs comes from being asynchronous.
func DescribeCall(c Call) string {
	info := c.Endpoint.info()
	if c.AcceptsIncomplete && !info.asyncSince.IsZero() && info.since.Less(info.asyncSince) {
		return "asynchronous " + c.Endpoint.describe() + " (accepts_incomplete=true)"
	}
	return c.Endpoint.describe()
}

// versionError builds the 412 for a feature that needs version need when the
// request has version got.
func versionError(what string, need, got osb.Version) *osb.Error {
	return osb.Errorf(http.StatusPreconditionFailed, "", "%s needs %s %s or later; the request has %s",
		what, osb.HeaderAPIVersion, need, got)
}
