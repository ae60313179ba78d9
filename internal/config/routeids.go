package config

import "github.com/google/uuid"

// RouteIDs is a route's rewrite of the ids it shows (routes[].ids): the
// service and plan ids of the catalog (and each service's
// dashboard_client.id) become UUIDv5 ids derived from Namespace and the
// broker's id, and requests are mapped back to the broker's ids before
// the gateway checks or forwards them. Instance and binding ids pass
// unchanged.
type RouteIDs struct {
	// Namespace is the UUID namespace of the derived ids: a UUID, or any
	// other string, from which a UUID is derived (NamespaceUUID).
	// Required.
	Namespace string `yaml:"namespace" validate:"required"`
}

// idsNamespaceSeed is what NamespaceUUID prefixes a namespace that is no
// UUID with before it derives one. It never changes: the derived ids of
// every registration depend on it.
const idsNamespaceSeed = "osb-gateway:"

// NamespaceUUID is the UUID namespace the derived ids are made in: the
// namespace itself when it parses as a UUID (uuid.Parse: canonical form,
// urn:uuid:, braces or 32 hex digits), else the UUIDv5 of
// "osb-gateway:" + namespace in the URL namespace
// (uuid.NewSHA1(uuid.NameSpaceURL, …)). Both are fixed for good: a
// registration's ids must never change.
func (r RouteIDs) NamespaceUUID() uuid.UUID {
	if u, err := uuid.Parse(r.Namespace); err == nil {
		return u
	}
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte(idsNamespaceSeed+r.Namespace))
}

// checkRouteIDs checks the routes a tenant has to one broker more than
// once (checkRoutes lets them through only then): each must show ids of
// its own, so at most one of them shows the broker's own ids and no two
// derive them in the same namespace; and a tenant's rate limits on a
// broker are kept once, so at most one of them may set limits.
func checkRouteIDs(c *Config, probs *Problems) {
	for i, t := range c.Tenants {
		for j, r := range t.Routes {
			path := joinIndex(joinKey(joinIndex("tenants", i), "routes"), j)
			for k, first := range t.Routes[:j] {
				if first.Broker != r.Broker || r.Broker == "" {
					continue
				}
				switch {
				case r.IDs == nil && first.IDs == nil:
					probs.addf(path+".broker", "%q is already routed by routes[%d]; a tenant reaches a broker more than once only through routes that show ids of their own (routes[].ids: {namespace: …}), at most one of them without", r.Broker, k)
				case r.IDs != nil && first.IDs != nil && r.IDs.Namespace != "" && r.IDs.NamespaceUUID() == first.IDs.NamespaceUUID():
					probs.addf(path+".ids.namespace", "%q derives the same ids as routes[%d].ids.namespace %q, on the same broker %q: give each route to a broker a namespace of its own", r.IDs.Namespace, k, first.IDs.Namespace, r.Broker)
				case r.Limits != nil && first.Limits != nil:
					probs.addf(path+".limits", "routes[%d] to broker %q has limits already: a tenant's limits on a broker are kept once, so set them on one of its routes to it", k, r.Broker)
				}
			}
		}
	}
}
