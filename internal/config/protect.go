package config

import "time"

// Defaults of the per-broker protections: the concurrency cap and its
// queue, and the circuit breaker.
const (
	// DefaultQueueTimeout is brokers[].queue_timeout when max_in_flight is
	// set: how long a call over the cap waits for a slot.
	DefaultQueueTimeout = 10 * time.Second
	// MaxQueueTimeout bounds brokers[].queue_timeout.
	MaxQueueTimeout = 10 * time.Minute

	// DefaultBreakerFailures is brokers[].breaker.failures: the
	// consecutive failed calls that open the breaker.
	DefaultBreakerFailures = 5
	// DefaultBreakerOpenFor is brokers[].breaker.open_for: how long an
	// open breaker answers for the broker before it lets probes through.
	DefaultBreakerOpenFor = 10 * time.Second
	// DefaultBreakerProbes is brokers[].breaker.probes: the calls let
	// through while half-open, all of which must succeed to close it.
	DefaultBreakerProbes = 1
)

// Breaker is a broker's circuit breaker (brokers[].breaker). A broker
// without one has none; `breaker: {}` turns one on with the defaults, as
// Envoy's outlier detection is off until configured and then takes its
// defaults.
type Breaker struct {
	// Failures is how many consecutive failed calls (5xx, unreachable,
	// timed out, cut short) open the breaker; zero value:
	// DefaultBreakerFailures.
	Failures int `yaml:"failures" validate:"gte=0,lte=10000"`
	// OpenFor is how long the open breaker answers every call at once
	// without reaching the broker; zero value: DefaultBreakerOpenFor.
	OpenFor time.Duration `yaml:"open_for" validate:"gte=0,lte=1h"`
	// Probes is how many calls the half-open breaker lets through after
	// OpenFor; all must succeed to close it, one failure opens it again.
	// Zero value: DefaultBreakerProbes.
	Probes int `yaml:"probes" validate:"gte=0,lte=1000"`
}

func (b *Broker) applyProtectDefaults() {
	if b.MaxInFlight > 0 && b.QueueTimeout == nil {
		d := DefaultQueueTimeout
		b.QueueTimeout = &d
	}
	if br := b.Breaker; br != nil {
		if br.Failures == 0 {
			br.Failures = DefaultBreakerFailures
		}
		setDuration(&br.OpenFor, DefaultBreakerOpenFor)
		if br.Probes == 0 {
			br.Probes = DefaultBreakerProbes
		}
	}
}

// QueueWait is how long a call over the broker's cap waits for a slot:
// queue_timeout, zero when calls over the cap are refused at once (or
// there is no cap).
func (b *Broker) QueueWait() time.Duration {
	if b.QueueTimeout == nil {
		return 0
	}
	return *b.QueueTimeout
}

// checkProtect checks what spans a broker's cap and the listener.
func checkProtect(c *Config, probs *Problems) {
	for i := range c.Brokers {
		b := &c.Brokers[i]
		path := joinIndex("brokers", i)
		if b.QueueTimeout == nil || probs.seen[path+".queue_timeout"] || probs.seen[path+".max_in_flight"] {
			continue
		}
		if b.MaxInFlight == 0 {
			probs.addf(path+".queue_timeout", "is set but max_in_flight is not: without a cap no call waits")
			continue
		}
		if q := *b.QueueTimeout; q+b.Timeout > c.Listen.WriteTimeout && !probs.seen[path+".timeout"] {
			probs.addf(path+".queue_timeout", "%s plus timeout (%s) is longer than listen.write_timeout (%s): the answer of a call that waited could be cut off",
				q, b.Timeout, c.Listen.WriteTimeout)
		}
	}
}
