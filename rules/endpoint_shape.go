package rules

// Path shapes for labels and span attributes: what a refused call was
// aiming at, and the path with its ids templated.

// routeTemplates are the routes' paths in the OpenTelemetry http.route
// form, ids as {instance_id} and {binding_id}, indexed by routeID (built
// once from routes: a template never allocates).
var routeTemplates = func() [len(routes)]string {
	var t [len(routes)]string
	for r := range routes {
		if routeID(r) == noRoute {
			continue
		}
		s := "/v2"
		for _, seg := range routes[r].segs {
			switch seg {
			case instanceParam:
				seg = "{instance_id}"
			case bindingParam:
				seg = "{binding_id}"
			}
			s += "/" + seg
		}
		t[r] = s
	}
	return t
}()

// EndpointOf names the endpoint a request's method and escaped path (the
// route prefix stripped, "/v2/…") have the shape of, without decoding or
// checking ids or the query: Unknown when no endpoint has that shape. It
// labels calls refused before Classify ran (authentication, the version
// header), so that a 401 or 412 is counted against the endpoint it was
// aimed at. It does not allocate.
func EndpointOf(method, path string) Endpoint {
	var segs [maxSegments]string
	r, ok := matchRoute(path, &segs)
	if !ok {
		return Unknown
	}
	return endpointFor(r, method)
}

// Template returns the endpoint's path with its ids as placeholders, such
// as "/v2/service_instances/{instance_id}/last_operation" (OpenTelemetry's
// http.route form); "" for Unknown.
func (e Endpoint) Template() string { return routeTemplates[e.info().route] }
