package proxy

// brokerProtectionStatus is a broker's cap and breaker in GET /admin/brokers,
// flattened into its row.
type brokerProtectionStatus struct {
	// MaxInFlight is brokers[].max_in_flight (0: no cap) and
	// QueueTimeoutSeconds its queue_timeout.
	MaxInFlight         int     `json:"max_in_flight"`
	QueueTimeoutSeconds float64 `json:"queue_timeout_seconds"`
	// InFlight and Queued are the calls holding a slot and waiting for
	// one; nil without a cap (the calls are not counted).
	InFlight *int `json:"in_flight,omitempty"`
	Queued   *int `json:"queued,omitempty"`
	// Breaker is the circuit breaker; nil without one.
	Breaker *breakerStatus `json:"breaker,omitempty"`
}

// status describes p; a nil p is a broker without a cap or a breaker.
func (p *brokerProtection) status() brokerProtectionStatus {
	var ps brokerProtectionStatus
	if p == nil {
		return ps
	}
	if q := p.queue; q != nil {
		inFlight, queued := q.counts()
		ps.MaxInFlight, ps.QueueTimeoutSeconds = q.max, q.timeout.Seconds()
		ps.InFlight, ps.Queued = &inFlight, &queued
	}
	if p.breaker != nil {
		ps.Breaker = p.breaker.status()
	}
	return ps
}
