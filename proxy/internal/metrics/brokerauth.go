package metrics

import "github.com/prometheus/client_golang/prometheus"

// newBrokerCredentialGauge is osb_gateway_broker_credential.
func newBrokerCredentialGauge() *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_broker_credential",
		Help: `The basic-auth credential the gateway sends a broker with two (brokers[].next_password): 1 for the one in use ("current" or "next"), 0 for the other.`},
		[]string{"broker", "which"})
}

// BrokerCredential shows that broker's credential using (credentialCurrent
// or credentialNext) is in use.
func (m *Metrics) BrokerCredential(broker string, using int) {
	if m == nil {
		return
	}
	for i, name := range CredentialNames {
		v := 0.0
		if i == using {
			v = 1
		}
		m.brokerCred.WithLabelValues(broker, name).Set(v)
	}
}

// ForgetBrokerCredential drops broker's series, once it has no second
// credential (or is gone).
func (m *Metrics) ForgetBrokerCredential(broker string) {
	if m == nil {
		return
	}
	for _, name := range CredentialNames {
		m.brokerCred.DeleteLabelValues(broker, name)
	}
}

// newTokenFetchCounter is osb_gateway_broker_token_fetches_total.
func newTokenFetchCounter() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_broker_token_fetches_total",
		Help: `OAuth2 token fetches for brokers with auth type oauth2, by broker and outcome: "ok", "timeout" (no answer within brokers[].timeout), "unreachable", "refused" (the client credentials: 400, 401, 403), "failed" (another status), "not_token" (an answer that holds no token).`},
		[]string{"broker", "outcome"})
}

// TokenFetched counts one token fetch for broker that ended with outcome.
func (m *Metrics) TokenFetched(broker, outcome string) {
	if m == nil {
		return
	}
	m.tokenFetches.WithLabelValues(broker, outcome).Inc()
}

var CredentialNames = [2]string{"current", "next"}
