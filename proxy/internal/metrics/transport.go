package metrics

import (
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// BrokerCall records one broker call's duration; statusClass is "2xx" …
// "5xx", or "error" when no answer came.
func (m *Metrics) BrokerCall(broker string, endpoint rules.Endpoint, statusClass string, d time.Duration) {
	if m == nil {
		return
	}
	class := -1
	if statusClass == brokerErrorClass {
		class = brokerError
	}
	for i, name := range statusClasses {
		if name == statusClass {
			class = i
		}
	}
	if class < 0 {
		m.broker.WithLabelValues(broker, endpoint.String(), statusClass).Observe(d.Seconds())
		return
	}
	m.brokerCalls(broker, endpoint, class).Observe(d.Seconds())
}

// Transport wraps a broker Transport so that each call's duration, from
// sending the request until its response body is closed, is recorded as
// BrokerCall does, by the broker and endpoint of the Scope in the call's
// context: a platform call's, or the gateway's own (upstream.ownCall). A
// nil m returns rt.
func (m *Metrics) Transport(rt http.RoundTripper) http.RoundTripper {
	if m == nil {
		return rt
	}
	return &meteredTransport{rt: rt, m: m}
}

type meteredTransport struct {
	rt http.RoundTripper
	m  *Metrics
}

// RoundTrip implements http.RoundTripper.
func (t *meteredTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return t.roundTrip(req, core.ScopeFrom(req.Context()))
}

// roundTrip is RoundTrip of a call whose Scope, s, its caller has already
// looked up (scopedRoundTripper).
func (t *meteredTransport) roundTrip(req *http.Request, s *core.Scope) (*http.Response, error) {
	broker, ep := "", rules.Unknown
	if s != nil {
		broker, ep = s.Broker, s.Call.Endpoint
	}
	start := t.m.Tick()
	res, err := t.rt.RoundTrip(req)
	if err != nil {
		t.m.brokerCalls(broker, ep, brokerError).Observe((t.m.Tick() - start).Seconds())
		return nil, err
	}
	obs := t.m.brokerCalls(broker, ep, classIndex(res.StatusCode))
	if res.Body == nil {
		obs.Observe((t.m.Tick() - start).Seconds())
		return res, nil
	}
	var b *core.MeteredBody
	if s != nil && !s.Metered.InUse { // the call's own: no allocation
		b = &s.Metered
	} else {
		b = new(core.MeteredBody)
	}
	*b = core.MeteredBody{ReadCloser: res.Body, Clock: &t.m.clock, Obs: obs, Start: start, InUse: true}
	res.Body = b
	return res, nil
}
