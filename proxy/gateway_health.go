package proxy

import (
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
