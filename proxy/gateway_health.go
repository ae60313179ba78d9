package proxy

import (
	"context"
	"fmt"

	"github.com/osb-gateway/osb-gateway/proxy/internal/catalog"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/policies"
	"github.com/osb-gateway/osb-gateway/proxy/internal/routes"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
	"github.com/osb-gateway/osb-gateway/rules"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

// BrokersUp maps every configured broker to whether the gateway takes it
// to be up: not when its circuit breaker is open, nor when the latest
// fetch of one of its catalogs failed (the failure is remembered and
// backed off, see GET /admin/brokers' catalog_last_error). A broker no
// call has reached yet is up. The osb_gateway_broker_up gauge
// (Metrics.ObserveBrokers).
func (g *Gateway) BrokersUp() map[string]bool {
	out := make(map[string]bool, len(g.cfg.Brokers))
	for _, b := range g.cfg.Brokers {
		up := true
		if p := g.brokerProtect[b.Name]; p != nil && p.Breaker != nil && p.Breaker.IsOpen() {
			up = false
		}
		st := g.catalogs.StatsFor(b.Name)
		st.Mu.Lock()
		if st.LastError != "" {
			up = false
		}
		st.Mu.Unlock()
		out[b.Name] = up
	}
	return out
}

// BrokerCertificates returns the client certificates the gateway presents
// to brokers (brokers[].tls.cert_file), for
// osb_gateway_certificate_expiry_seconds (Metrics.ObserveCertificates).
func (g *Gateway) BrokerCertificates() []CertExpiry {
	var out []CertExpiry
	for _, b := range g.cfg.Brokers {
		u := g.upstreams[b.Name]
		if u == nil || u.TLS == nil {
			continue
		}
		for i := range u.TLS.Certificates {
			if leaf := gwtls.Leaf(&u.TLS.Certificates[i]); leaf != nil {
				out = append(out, CertExpiry{Use: "broker", Broker: b.Name, Cert: leaf})
			}
		}
	}
	return out
}

// Overloaded reports nil while fewer than listen.max_in_flight platform
// calls are in flight (those of Gateways this one replaced included), or
// says how many are: the next call would be shed. Readiness reports it.
func (g *Gateway) Overloaded() error { return g.protect.Overload.Overloaded() }

// MigrationProblems names each migrating route (routes[].migrate_to)
// whose new broker's catalog lacks a service or plan id that the tenant
// sees in the old broker's catalog: the route's provisions are refused
// until it carries them. Catalogs are read from the cache, fetched when
// missing, at the version the gateway fetches at; a route either of whose
// catalogs cannot be had is left out (the fetch failure is reported on
// its own). osb-gateway check prints them as problems.
func (g *Gateway) MigrationProblems(ctx context.Context) []string {
	indexOf := func(name string) *rules.Index {
		u := g.upstreams[name]
		if u == nil {
			return nil
		}
		key := catalog.Key{Broker: u.Name, Version: u.WarmVersion().String()}
		e, err := g.catalogs.Load(ctx, catalog.Fetch{Up: u, Key: key, ReqID: core.NewRequestID()}, nil)
		if err != nil {
			return nil
		}
		return e.Rules
	}
	var out []string
	for i, t := range g.cfg.Tenants {
		for j, rc := range t.Routes {
			if rc.MigrateTo == "" {
				continue
			}
			old, nw := indexOf(rc.Broker), indexOf(rc.MigrateTo)
			if old == nil || nw == nil {
				continue
			}
			if missing := routes.MissingIDs(catalog.NewFilter(rc), old, nw); missing != "" {
				out = append(out, fmt.Sprintf("tenants[%d].routes[%d].migrate_to: the catalog of broker %q lacks %s of broker %q's catalog, which the platform sees: the route's provisions are refused until it carries them",
					i, j, rc.MigrateTo, missing, rc.Broker))
			}
		}
	}
	return out
}

// upstreamOf is g's upstream of the broker named, nil when g is nil or has
// none.
func (g *Gateway) upstreamOf(name string) *upstream.Upstream {
	if g == nil {
		return nil
	}
	return g.upstreams[name]
}

// policyState is g's policies, nil for a nil g.
func (g *Gateway) policyState() *policies.Stage {
	if g == nil {
		return nil
	}
	return g.policy
}
