package protect

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sony/gobreaker/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// brokerBreaker is one broker's circuit breaker (brokers[].breaker), a
// gobreaker.TwoStepCircuitBreaker: the protect stage asks it before a call
// (allow) and tells it how the call went (account). After breaker.failures
// consecutive failures it opens: every call is answered at once for
// open_for, then probes calls are let through (half-open); when all of
// them succeed it closes, when one fails it opens again. Safe for
// concurrent use.
type brokerBreaker struct {
	name    string
	cfg     config.Breaker
	cb      *gobreaker.TwoStepCircuitBreaker[struct{}]
	now     func() time.Time // the gateway's clock, for Retry-After and the admin view
	log     *slog.Logger
	metrics *metrics.Metrics

	mu          sync.Mutex
	lastErr     string    // the last failure's description (the gateway's own words, never a body)
	lastErrAt   time.Time // when it was accounted
	changedAt   time.Time // the last transition
	openedAt    time.Time // the last transition to open
	transitions int64
}

func newBrokerBreaker(name string, c config.Breaker, now func() time.Time, log *slog.Logger, m *metrics.Metrics) *brokerBreaker {
	b := &brokerBreaker{name: name, cfg: c, now: now, log: log, metrics: m}
	failures := uint32(c.Failures)
	b.cb = gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		Name:        name,
		MaxRequests: uint32(c.Probes),
		Timeout:     c.OpenFor,
		// Interval 0: closed, the counts are never cleared; only the
		// consecutive failures matter.
		ReadyToTrip:   func(n gobreaker.Counts) bool { return n.ConsecutiveFailures >= failures },
		OnStateChange: b.changed,
	})
	return b
}

// changed records a transition. gobreaker calls it holding its own lock:
// it must not call back into b.cb.
func (b *brokerBreaker) changed(_ string, from, to gobreaker.State) {
	now := b.now()
	b.mu.Lock()
	b.transitions++
	b.changedAt = now
	if to == gobreaker.StateOpen {
		b.openedAt = now
	}
	last := b.lastErr
	b.mu.Unlock()
	b.metrics.BreakerChanged(b.name, to)
	attrs := []slog.Attr{slog.String("broker", b.name), slog.String("from", metrics.BreakerStateName(from)), slog.String("to", metrics.BreakerStateName(to))}
	level := slog.LevelInfo
	if to == gobreaker.StateOpen {
		level = slog.LevelWarn
		attrs = append(attrs, slog.Duration("open_for", b.cfg.OpenFor), slog.String("last_error", last))
	}
	b.log.LogAttrs(context.Background(), level, "broker circuit breaker "+metrics.BreakerStateName(to), attrs...)
}

// IsOpen reports whether the breaker answers every call now.
func (b *brokerBreaker) IsOpen() bool { return b.cb.State() == gobreaker.StateOpen }

// allow asks for one call: it returns the func that accounts the call's
// outcome, or the refusal to answer with (status 429 or 503 as the caller
// says).
func (b *brokerBreaker) allow(status int) (func(bool), *osb.Error) {
	done, err := b.cb.Allow()
	if err == nil {
		return done, nil
	}
	return nil, b.refusal(status, errors.Is(err, gobreaker.ErrTooManyRequests))
}

// refusal is the answer to a call the breaker does not let through:
// probing when the half-open breaker's probes are all in flight.
func (b *brokerBreaker) refusal(status int, probing bool) *osb.Error {
	b.mu.Lock()
	last, opened := b.lastErr, b.openedAt
	b.mu.Unlock()
	if last == "" {
		last = "none recorded"
	}
	secs := int64(1)
	why := fmt.Sprintf("after %d consecutive failed calls the gateway stopped calling it for %s (brokers[].breaker)", b.cfg.Failures, b.cfg.OpenFor)
	if probing {
		why = fmt.Sprintf("the gateway is letting %d probe call(s) through to see whether it recovered (brokers[].breaker.probes), and they are in flight", b.cfg.Probes)
	} else if left := opened.Add(b.cfg.OpenFor).Sub(b.now()); left > 0 {
		secs = max(1, int64(math.Ceil(left.Seconds())))
	}
	return &osb.Error{Status: status, Header: http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}},
		Description: fmt.Sprintf("broker %q is failing: last error: %s; %s; this call was not sent to it, retry after %ds",
			b.name, last, why, secs)}
}

// account tells the breaker how an allowed call went, from its Scope (see
// judge); reached reports whether the broker was called; done is what
// allow returned.
func (b *brokerBreaker) account(s *core.Scope, reached bool, done func(bool)) {
	failed, known, desc := judge(s, reached)
	switch {
	case failed:
		b.mu.Lock()
		b.lastErr, b.lastErrAt = desc, b.now()
		b.mu.Unlock()
		done(false)
	case known:
		done(true)
	case b.cb.State() == gobreaker.StateHalfOpen:
		// Nothing was learned, but a probe left unaccounted would hold
		// the half-open breaker forever: it counts as a success (the
		// next failures open it again).
		done(true)
	}
	// Closed and nothing learned: not counted either way.
}

// judge reads a call's outcome from its Scope: known is false when the
// broker was not called (the guard's busy answer, an emulation) or the
// platform went away before it answered; a failure is a 5xx from the
// broker, or no usable answer (unreachable, TLS failure, timeout, a body
// cut short: the upstream stage's 502 and 504; no OAuth2 token to call it
// with). A 4xx is no failure, nor
// is an answer the response rules refused unless its status was 5xx.
func judge(s *core.Scope, reached bool) (failed, known bool, desc string) {
	if !reached || s.Status == 0 || s.Status == core.StatusClientClosed {
		return false, false, ""
	}
	if s.Err == nil {
		if s.Status >= 500 {
			return true, true, fmt.Sprintf("broker %q answered %s with status %d", s.Broker, s.Call.Endpoint, s.Status)
		}
		return false, true, ""
	}
	var refused *core.ResponseRefused
	if errors.As(s.Err, &refused) {
		if refused.Status >= 500 {
			return true, true, fmt.Sprintf("broker %q answered %s with status %d", s.Broker, s.Call.Endpoint, refused.Status)
		}
		return false, true, ""
	}
	var e *osb.Error
	var auth core.NoToken
	if errors.As(s.Err, &e) && errors.As(s.Err, &auth) && auth.NoToken() {
		return true, true, e.Description // no OAuth2 token: the broker cannot be called, whatever the status (a mutating call's 429)
	}
	if errors.As(s.Err, &e) && (e.Status == http.StatusBadGateway || e.Status == http.StatusGatewayTimeout) {
		return true, true, e.Description
	}
	return false, true, ""
}

// BreakerInfo is a broker's circuit breaker: its settings, its state and
// the counts since its last transition.
type BreakerInfo struct {
	// State is closed, half_open or open.
	State string
	// Failures, OpenFor and Probes are the breaker's settings
	// (brokers[].breaker).
	Failures int
	OpenFor  time.Duration
	Probes   int
	// The counts since the last transition (gobreaker.Counts).
	Requests, ConsecutiveFailures, ConsecutiveSuccesses, TotalFailures, TotalSuccesses uint32
	Transitions                                                                        int64
	// ChangedAt is the last transition, in UTC (zero: none yet);
	// RetryAfterSeconds, while open, how many whole seconds until probes
	// are let through (0 otherwise).
	ChangedAt         time.Time
	RetryAfterSeconds int64
	// LastError is the last failure the breaker counted and LastErrorAt
	// when, in UTC (zero: none).
	LastError   string
	LastErrorAt time.Time
}

// Status is the breaker as the View shows it: its settings, its state
// and the counts since its last transition.
func (b *brokerBreaker) Status() *BreakerInfo {
	st, n := b.cb.State(), b.cb.Counts()
	bs := &BreakerInfo{State: metrics.BreakerStateName(st), Failures: b.cfg.Failures, OpenFor: b.cfg.OpenFor,
		Probes: b.cfg.Probes, Requests: n.Requests, ConsecutiveFailures: n.ConsecutiveFailures,
		ConsecutiveSuccesses: n.ConsecutiveSuccesses, TotalFailures: n.TotalFailures, TotalSuccesses: n.TotalSuccesses}
	b.mu.Lock()
	defer b.mu.Unlock()
	bs.Transitions, bs.LastError = b.transitions, b.lastErr
	if !b.changedAt.IsZero() {
		bs.ChangedAt = b.changedAt.UTC()
	}
	if !b.lastErrAt.IsZero() {
		bs.LastErrorAt = b.lastErrAt.UTC()
	}
	if st == gobreaker.StateOpen {
		if left := b.openedAt.Add(b.cfg.OpenFor).Sub(b.now()); left > 0 {
			bs.RetryAfterSeconds = max(1, int64(math.Ceil(left.Seconds())))
		}
	}
	return bs
}
