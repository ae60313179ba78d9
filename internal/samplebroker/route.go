package samplebroker

import (
	"net/http"
	"net/url"
	"strings"
)

// Endpoint names, as used by Fault.Endpoint, Broker.Count and
// GET /_sample/stats. They match the gateway's rules.Endpoint names.
const (
	EndpointCatalog               = "catalog"                 // GET /v2/catalog
	EndpointProvision             = "provision"               // PUT instance
	EndpointUpdate                = "update"                  // PATCH instance
	EndpointDeprovision           = "deprovision"             // DELETE instance
	EndpointGetInstance           = "get_instance"            // GET instance
	EndpointInstanceLastOperation = "instance_last_operation" // GET instance last_operation
	EndpointBind                  = "bind"                    // PUT binding
	EndpointUnbind                = "unbind"                  // DELETE binding
	EndpointGetBinding            = "get_binding"             // GET binding
	EndpointBindingLastOperation  = "binding_last_operation"  // GET binding last_operation
	// EndpointUnknown counts /v2 requests that match no endpoint (404, 405).
	EndpointUnknown = "unknown"
	// EndpointLastOperation is accepted as another name for
	// EndpointInstanceLastOperation.
	EndpointLastOperation = "last_operation"
)

// endpoint is one OSB endpoint; it indexes the request counters.
type endpoint uint8

const (
	epUnknown endpoint = iota
	epCatalog
	epProvision
	epUpdate
	epDeprovision
	epGetInstance
	epInstanceLastOperation
	epBind
	epUnbind
	epGetBinding
	epBindingLastOperation
	numEndpoints
)

// endpointNames is indexed by endpoint.
var endpointNames = [numEndpoints]string{
	epUnknown:               EndpointUnknown,
	epCatalog:               EndpointCatalog,
	epProvision:             EndpointProvision,
	epUpdate:                EndpointUpdate,
	epDeprovision:           EndpointDeprovision,
	epGetInstance:           EndpointGetInstance,
	epInstanceLastOperation: EndpointInstanceLastOperation,
	epBind:                  EndpointBind,
	epUnbind:                EndpointUnbind,
	epGetBinding:            EndpointGetBinding,
	epBindingLastOperation:  EndpointBindingLastOperation,
}

// String returns the endpoint's name.
func (e endpoint) String() string { return endpointNames[e] }

// since214 reports whether the endpoint was added in OSB 2.14, so that a
// legacy broker does not have it.
func (e endpoint) since214() bool {
	return e == epGetInstance || e == epGetBinding || e == epBindingLastOperation
}

// mutating reports whether the endpoint changes state: the calls the call
// log records.
func (e endpoint) mutating() bool {
	return e == epProvision || e == epUpdate || e == epDeprovision || e == epBind || e == epUnbind
}

// endpointByName resolves an endpoint name (or the alias "last_operation").
func endpointByName(name string) (endpoint, bool) {
	if name == EndpointLastOperation {
		return epInstanceLastOperation, true
	}
	for e, n := range endpointNames {
		if n == name {
			return endpoint(e), true
		}
	}
	return epUnknown, false
}

// Allow header values per path shape.
const (
	allowCatalog   = "GET"
	allowInstance  = "DELETE, GET, PATCH, PUT"
	allowBinding   = "DELETE, GET, PUT"
	allowLastOpGet = "GET"
)

// route classifies a request without allocating. For a known path with the
// wrong method it returns epUnknown and the methods the path allows.
func route(method, path string) (ep endpoint, instanceID, bindingID, allow string) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return epUnknown, "", "", ""
	}
	if rest == "catalog" {
		if method == http.MethodGet {
			return epCatalog, "", "", ""
		}
		return epUnknown, "", "", allowCatalog
	}
	rest, ok = strings.CutPrefix(rest, "service_instances/")
	if !ok {
		return epUnknown, "", "", ""
	}
	instanceID, rest, more := strings.Cut(rest, "/")
	if instanceID == "" {
		return epUnknown, "", "", ""
	}
	if !more {
		switch method {
		case http.MethodPut:
			return epProvision, instanceID, "", ""
		case http.MethodPatch:
			return epUpdate, instanceID, "", ""
		case http.MethodDelete:
			return epDeprovision, instanceID, "", ""
		case http.MethodGet:
			return epGetInstance, instanceID, "", ""
		}
		return epUnknown, "", "", allowInstance
	}
	if rest == "last_operation" {
		return lastOpRoute(method, epInstanceLastOperation, instanceID, "")
	}
	rest, ok = strings.CutPrefix(rest, "service_bindings/")
	if !ok {
		return epUnknown, "", "", ""
	}
	bindingID, rest, more = strings.Cut(rest, "/")
	switch {
	case bindingID == "":
		return epUnknown, "", "", ""
	case more && rest == "last_operation":
		return lastOpRoute(method, epBindingLastOperation, instanceID, bindingID)
	case more:
		return epUnknown, "", "", ""
	}
	switch method {
	case http.MethodPut:
		return epBind, instanceID, bindingID, ""
	case http.MethodDelete:
		return epUnbind, instanceID, bindingID, ""
	case http.MethodGet:
		return epGetBinding, instanceID, bindingID, ""
	}
	return epUnknown, "", "", allowBinding
}

// lastOpRoute accepts only GET on a last_operation path.
func lastOpRoute(method string, ep endpoint, instanceID, bindingID string) (endpoint, string, string, string) {
	if method != http.MethodGet {
		return epUnknown, "", "", allowLastOpGet
	}
	return ep, instanceID, bindingID, ""
}

// queryValue returns the first value of key in a raw query string. It
// allocates only when the value is escaped.
func queryValue(rawQuery, key string) (string, bool) {
	for rawQuery != "" {
		var kv string
		kv, rawQuery, _ = strings.Cut(rawQuery, "&")
		k, v, _ := strings.Cut(kv, "=")
		if k != key {
			continue
		}
		if strings.ContainsAny(v, "%+") {
			u, err := url.QueryUnescape(v)
			if err != nil {
				return "", false
			}
			v = u
		}
		return v, true
	}
	return "", false
}

// acceptsIncomplete reports whether the query says accepts_incomplete=true.
func acceptsIncomplete(r *http.Request) bool {
	v, _ := queryValue(r.URL.RawQuery, "accepts_incomplete")
	return v == "true"
}

// Count returns how many /v2 requests for the named endpoint reached the
// broker since New or the last ResetCounts, whatever their outcome
// (including 401, 412 and injected faults). The empty name counts all /v2
// requests; an unknown name counts none. Control requests are not counted.
func (b *Broker) Count(name string) int64 {
	if name == "" {
		var n int64
		for i := range b.counts {
			n += b.counts[i].Load()
		}
		return n
	}
	e, ok := endpointByName(name)
	if !ok {
		return 0
	}
	return b.counts[e].Load()
}

// Counts returns every endpoint's count by name.
func (b *Broker) Counts() map[string]int64 {
	m := make(map[string]int64, numEndpoints)
	for e, n := range endpointNames {
		m[n] = b.counts[e].Load()
	}
	return m
}

// ResetCounts sets every endpoint's count to zero.
func (b *Broker) ResetCounts() {
	for i := range b.counts {
		b.counts[i].Store(0)
	}
}
