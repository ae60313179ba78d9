package core

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/rules"
)

// NumCallClasses is the number of call classes the overload stage sheds by
// (reads and mutations).
const NumCallClasses = 2

// Route is one tenant's access to one broker under a URL prefix, built
// once per configuration. The core knows its prefix; each part a feature
// adds is that feature's own type, set by the code that builds the route
// and read back by the feature's accessor (a nil part, or a part holding
// a nil pointer: the route has none of it). Parts are read through their
// accessors only: an interface holding a nil pointer is not nil.
type Route struct {
	Prefix string
	// Tenant is the tenant whose route it is (its credentials).
	Tenant any
	// MissingVersionStatus is the tenant's status for a call without
	// X-Broker-API-Version (tenants[].missing_version_status).
	MissingVersionStatus int
	// Up is the broker's upstream, which the call reaches; Broker is its
	// settings (brokers[]), which stages read without the upstream.
	Up     any
	Broker *config.Broker
	// MaxVersion is the broker's maximum X-Broker-API-Version as the
	// gateway forwards it (Broker.APIVersion.Max, formatted once).
	MaxVersion string
	// Filter is the tenant's view of the broker's catalog; nil: all.
	Filter any
	// Limits are the rate limits the route's calls pass; nil: none.
	Limits any
	// Shed counts the calls the overload stage refused, by class; nil
	// counters without metrics.
	Shed [NumCallClasses]prometheus.Counter
	// BrokerProtect is the broker's cap and breaker; nil: none.
	BrokerProtect any
	// Migration is the route's migrate_to, set on both of its routes; nil:
	// none.
	Migration any
	// IDs is the rewrite of the ids the route shows; nil: the broker's own.
	IDs any
	// Policies are the policies the route's calls meet; nil: none.
	Policies any
	// Guard is the guard of the gateway the route belongs to: the guard
	// stage marks a call Guarded, and the broker call's callbacks settle
	// its answer with this guard.
	Guard any
}

// Catalog is a broker's catalog as the stages check calls against it.
type Catalog interface {
	Index() *rules.Index
}

// Negotiate negotiates r's X-Broker-API-Version against rt's broker and
// returns the version forwarded: the platform's, capped at the broker's
// maximum.
func Negotiate(r *http.Request, rt *Route) (rules.Negotiated, string, error) {
	b := rt.Broker
	vals := r.Header[HeaderAPIVersion]
	n, err := rules.Negotiate(vals, b.APIVersion.Min, b.APIVersion.Max, rt.MissingVersionStatus, b.Name)
	if err != nil {
		return n, "", err
	}
	if n.Capped {
		return n, rt.MaxVersion, nil
	}
	return n, vals[0], nil
}
