package protect

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// Scope.Protection values of the per-broker protections.
const (
	// ProtectionQueueTimeout: the broker was at max_in_flight and no slot
	// freed within queue_timeout.
	ProtectionQueueTimeout = "queue_timeout"
	// ProtectionBreaker: the broker's circuit breaker was open, or
	// half-open with its probes in flight.
	ProtectionBreaker = "breaker"
)

// BrokerProtection is what guards one broker from the platforms' calls:
// the cap on its calls in flight with the queue of calls over it, and its
// circuit breaker; either may be nil (off). It belongs to the broker's
// upstream: a reload that keeps the upstream keeps it, slots and breaker
// state included. Safe for concurrent use.
type BrokerProtection struct {
	broker  string
	Queue   *Queue         // nil: no cap
	Breaker *brokerBreaker // nil: no breaker
	metrics *metrics.Metrics
}

// newBrokerProtection builds the protection of broker b, or returns nil
// when b has neither a cap nor a breaker. tenants are those routed to b.
func newBrokerProtection(b *config.Broker, tenants []string, now func() time.Time, log *slog.Logger, m *metrics.Metrics) *BrokerProtection {
	if b.MaxInFlight == 0 && b.Breaker == nil {
		return nil
	}
	p := &BrokerProtection{broker: b.Name, metrics: m}
	if b.MaxInFlight > 0 {
		p.Queue = NewQueue(b.MaxInFlight, b.QueueWait())
	}
	st := gobreaker.StateClosed
	if b.Breaker != nil {
		p.Breaker = newBrokerBreaker(b.Name, *b.Breaker, now, log, m)
		st = p.Breaker.cb.State()
	}
	m.BrokerProtectStart(b.Name, tenants, p.Queue != nil, p.Breaker != nil, st)
	return p
}

// WithBrokerProtect is the protect stage, between the flight stage and the
// guard: a call to a broker at its cap waits for a slot (see Queue)
// and one its breaker refuses is answered at once, both before the guard,
// so that no refused call ever takes an operation lock. Refusals are 429
// with Retry-After for mutating calls (a platform retries a 4xx and never
// starts orphan mitigation for one) and 503 with Retry-After for reads.
// What the call holds (its slot, its breaker permit) is its ticket, held
// until the broker call ends: the innermost stage, withBrokerCall, ends it
// there, so that a call the async shim answered 202 for keeps its slot
// while it runs on; this stage ends it for a call that never reached the
// broker. The broker's calls the gateway makes itself (catalog fetches,
// orphan mitigation, and the polls of emulate.sync_within, which run
// inside the slot of the platform call they serve) do not pass here. on
// false (no broker has a cap or a breaker) leaves the stage out.
func WithBrokerProtect(on bool) core.Middleware {
	if !on {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if p := brokerProtectOf(s.Route); p != nil {
				p.serve(next, w, r, s)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// WithBrokerCall is the innermost stage, just before the upstream: it ends
// the call's ticket (withBrokerProtect) when the broker call ends, with
// what the broker did. on as for withBrokerProtect.
func WithBrokerCall(on bool) core.Middleware {
	if !on {
		return nil
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			if t := s.Ticket; t != nil && t.Claimed.CompareAndSwap(false, true) {
				defer endTicket(t, s, true)
			}
			next.ServeHTTP(w, r)
		})
	}
}

// endTicket gives back t's slot and tells the breaker how the call went;
// reached reports whether the broker was called (see judge). t is the
// call's core.Ticket, issued by a brokerProtection's serve.
func endTicket(t *core.Ticket, s *core.Scope, reached bool) {
	p := t.Of.(*BrokerProtection)
	if t.Done != nil {
		p.Breaker.account(s, reached, t.Done)
	}
	if t.Slot {
		p.Queue.Release()
	}
}

// serve passes one call through p's cap and breaker to next.
func (p *BrokerProtection) serve(next http.Handler, w http.ResponseWriter, r *http.Request, s *core.Scope) {
	status := http.StatusServiceUnavailable
	if s.Call.Endpoint.Mutating() {
		status = http.StatusTooManyRequests
	}
	t := &core.Ticket{Of: p}
	if q := p.Queue; q != nil {
		if !q.TryAcquire() {
			if p.Breaker != nil && p.Breaker.IsOpen() { // refused anyway: not worth a wait
				p.refuseBreaker(w, s, p.Breaker.refusal(status, false))
				return
			}
			if !p.wait(w, r, s, status) {
				return
			}
		}
		t.Slot = true
	}
	if b := p.Breaker; b != nil {
		done, refusal := b.allow(status)
		if refusal != nil {
			endTicket(t, s, false)
			p.refuseBreaker(w, s, refusal)
			return
		}
		t.Done = done
	}
	s.Ticket = t
	defer func() {
		if t.Claimed.CompareAndSwap(false, true) { // the broker was not called
			endTicket(t, s, false)
		}
	}()
	next.ServeHTTP(w, r)
}

// wait waits for a slot of p's queue; it answers and returns false when
// none came.
func (p *BrokerProtection) wait(w http.ResponseWriter, r *http.Request, s *core.Scope, status int) bool {
	q := p.Queue
	waited, err := q.Wait(r.Context(), s.Tenant)
	if q.Timeout > 0 {
		p.metrics.QueueWaited(s.Tenant, p.broker, waited, errors.Is(err, ErrQueueTimeout))
	} else if err != nil {
		p.metrics.QueueRefused(s.Tenant, p.broker)
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, ErrQueueTimeout):
		s.Protection = ProtectionQueueTimeout
		s.Fail(w, p.queueRefusal(s, status))
	default: // the platform went away: nobody to answer
		s.Err, s.Status = fmt.Errorf("the platform went away after %s waiting for a slot of broker %q: %w",
			waited.Round(time.Millisecond), p.broker, err), core.StatusClientClosed
	}
	return false
}

func (p *BrokerProtection) refuseBreaker(w http.ResponseWriter, s *core.Scope, refusal *osb.Error) {
	s.Protection = ProtectionBreaker
	p.metrics.BreakerRefused(s.Tenant, p.broker)
	s.Fail(w, refusal)
}

// queueRefusal is the answer to a call that got no slot in time.
func (p *BrokerProtection) queueRefusal(s *core.Scope, status int) *osb.Error {
	q := p.Queue
	secs := max(1, int64(math.Ceil(q.Timeout.Seconds())))
	why := fmt.Sprintf("no slot freed within %s (brokers[].queue_timeout)", q.Timeout)
	if q.Timeout <= 0 {
		why = "calls over it do not wait (brokers[].queue_timeout is 0s)"
	}
	return &osb.Error{Status: status, Header: http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}},
		Description: fmt.Sprintf("broker %q has %d calls in flight, its cap (brokers[].max_in_flight), and %s for this call of tenant %q; "+
			"it was not sent to the broker, retry after %ds", p.broker, q.Max, why, s.Tenant, secs)}
}

// BrokerProtections builds the protection of every broker of cfg that has
// one, keeping prev's (a reload's previous protections) for brokers whose
// upstream is kept; it returns nil when no broker has one.
func BrokerProtections(cfg *config.Config, kept func(name string) bool, prev map[string]*BrokerProtection, now func() time.Time, log *slog.Logger, m *metrics.Metrics) map[string]*BrokerProtection {
	var out map[string]*BrokerProtection
	for i := range cfg.Brokers {
		b := &cfg.Brokers[i]
		p := prev[b.Name]
		if p == nil || !kept(b.Name) {
			p = newBrokerProtection(b, routedTenants(cfg, b.Name), now, log, m)
		}
		if p == nil {
			continue
		}
		if out == nil {
			out = map[string]*BrokerProtection{}
		}
		out[b.Name] = p
	}
	return out
}

// routedTenants returns the tenants of cfg with a route to broker.
func routedTenants(cfg *config.Config, broker string) []string {
	var out []string
	for _, t := range cfg.Tenants {
		for _, r := range t.Routes {
			if r.Broker == broker {
				out = append(out, t.Name)
				break
			}
		}
	}
	return out
}

// brokerProtectOf is the route's part of this feature (core.Route); nil: none.
func brokerProtectOf(rt *core.Route) *BrokerProtection {
	p, _ := rt.BrokerProtect.(*BrokerProtection)
	return p
}
