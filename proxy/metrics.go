package proxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/rules"
)

// Outcomes of a call, as Scope.Outcome names them on spans, metrics and
// audit records.
const (
	OutcomeForwarded = "forwarded"         // the broker's answer went to the platform
	OutcomeBlocked   = "blocked"           // the guard refused: another operation is in progress
	OutcomeRejected  = "rejected"          // the gateway refused the request, or the broker's answer, by a rule
	OutcomeFromCache = "served_from_cache" // answered from the catalog cache
	OutcomeFailed    = "failed"            // the broker was unreachable or timed out, the platform left, or the gateway failed
)

// Outcome says what the gateway did with the call; read it after the inner
// stages returned. A broker's own error answers count as forwarded.
func (s *Scope) Outcome() string {
	switch {
	case s.Blocked:
		return OutcomeBlocked
	case s.FromCache:
		return OutcomeFromCache
	case s.Err == nil:
		return OutcomeForwarded
	}
	var refused *responseRefused
	var e *osb.Error
	if errors.As(s.Err, &refused) || errors.As(s.Err, &e) && e.Status < 500 {
		return OutcomeRejected
	}
	return OutcomeFailed
}

// status returns the status sent to the platform, 200 when nothing set it
// (the scope stage's own fallback runs after the outer stages).
func (s *Scope) status() int {
	if s.Status == 0 {
		return http.StatusOK
	}
	return s.Status
}

// statusClasses label metrics by status class; statusClass maps a status
// to one.
var statusClasses = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

func statusClass(code int) string {
	if c := code / 100; c >= 1 && c <= 5 {
		return statusClasses[c]
	}
	return statusClasses[0]
}

// Metrics are the gateway's instruments. Label sets are bounded: tenant
// and broker names come from the configuration, endpoints and rule ids
// from fixed tables, never ids or paths. A nil *Metrics records nothing,
// so stages may call its methods unconditionally. Safe for concurrent use;
// build one per process and share it across reloads.
type Metrics struct {
	now       func() time.Time
	meter     metric.Meter
	requests  metric.Int64Counter
	inFlight  metric.Int64UpDownCounter
	duration  metric.Float64Histogram
	broker    metric.Float64Histogram
	blocked   metric.Int64Counter
	findings  metric.Int64Counter
	orphans   metric.Int64Counter
	storeErrs metric.Int64Counter
	auditErrs metric.Int64Counter
	attrSets  sync.Map // labelKey → metric.MeasurementOption
}

// labelKey is one bounded label combination.
type labelKey struct {
	kind                 uint8
	tenant, broker, a, b string
	endpoint             rules.Endpoint
}

// durationBuckets are the histogram boundaries, in seconds: OSB calls take
// from milliseconds (cached catalogs) to a broker timeout (60s).
var durationBuckets = []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// NewMetrics creates the instruments on mp's meter; now is the clock (nil:
// time.Now) and must be the gateway's (Options.Now).
func NewMetrics(mp metric.MeterProvider, now func() time.Time) (*Metrics, error) {
	if now == nil {
		now = time.Now
	}
	m := &Metrics{now: now, meter: mp.Meter(instrumentationName)}
	var errs [9]error
	m.requests, errs[0] = m.meter.Int64Counter("osb_gateway.requests", metric.WithUnit("{request}"),
		metric.WithDescription("Platform calls by tenant, broker, endpoint and status class."))
	m.inFlight, errs[1] = m.meter.Int64UpDownCounter("osb_gateway.requests.in_flight", metric.WithUnit("{request}"),
		metric.WithDescription("Platform calls being served."))
	m.duration, errs[2] = m.meter.Float64Histogram("osb_gateway.request.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from receiving a platform call to its answer."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.broker, errs[3] = m.meter.Float64Histogram("osb_gateway.broker.duration", metric.WithUnit("s"),
		metric.WithDescription(`Broker calls by broker, endpoint and status class ("error": no answer).`),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	m.blocked, errs[4] = m.meter.Int64Counter("osb_gateway.blocked", metric.WithUnit("{request}"),
		metric.WithDescription("Calls refused because another operation on the instance is in progress."))
	m.findings, errs[5] = m.meter.Int64Counter("osb_gateway.findings", metric.WithUnit("{finding}"),
		metric.WithDescription("OSB rules broken, by broker, rule id and direction (request or response)."))
	m.orphans, errs[6] = m.meter.Int64Counter("osb_gateway.orphan.candidates", metric.WithUnit("{call}"),
		metric.WithDescription("Failed provisions and binds that need orphan mitigation, by broker and decision."))
	m.storeErrs, errs[7] = m.meter.Int64Counter("osb_gateway.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed state store operations, by operation."))
	m.auditErrs, errs[8] = m.meter.Int64Counter("osb_gateway.audit.write_errors", metric.WithUnit("{error}"),
		metric.WithDescription("Audit records that could not be written."))
	return m, errors.Join(errs[:]...)
}

// attrs returns the cached measurement option for a label combination,
// building it once.
func (m *Metrics) attrs(k labelKey, build func() []attribute.KeyValue) metric.MeasurementOption {
	if v, ok := m.attrSets.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(attribute.NewSet(build()...))
	v, _ := m.attrSets.LoadOrStore(k, opt)
	return v.(metric.MeasurementOption)
}

// Stage returns the metrics stage: after the inner stages return it counts
// the call and its duration by tenant, broker, endpoint and status class,
// blocked calls, the findings in the Scope and orphan-mitigation
// candidates. It belongs in Options.Outer. A nil m returns a stage that
// does nothing.
func (m *Metrics) Stage() Middleware {
	return func(next http.Handler) http.Handler {
		if m == nil {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			m.inFlight.Add(ctx, 1)
			defer m.inFlight.Add(ctx, -1)
			next.ServeHTTP(w, r)
			if s := ScopeFrom(ctx); s != nil {
				m.record(ctx, s)
			}
		})
	}
}

// record counts one served call from its Scope.
func (m *Metrics) record(ctx context.Context, s *Scope) {
	class := statusClass(s.status())
	ep := s.Call.Endpoint
	call := m.attrs(labelKey{kind: 1, tenant: s.Tenant, broker: s.Broker, endpoint: ep, a: class}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("tenant", s.Tenant), attribute.String("broker", s.Broker),
			attribute.String("endpoint", ep.String()), attribute.String("status_class", class)}
	})
	m.requests.Add(ctx, 1, call)
	m.duration.Record(ctx, m.now().Sub(s.Start).Seconds(), call)
	if s.Blocked {
		m.blocked.Add(ctx, 1, m.attrs(labelKey{kind: 2, tenant: s.Tenant, broker: s.Broker, endpoint: ep}, func() []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("tenant", s.Tenant), attribute.String("broker", s.Broker),
				attribute.String("endpoint", ep.String())}
		}))
	}
	for _, f := range s.Findings {
		m.findings.Add(ctx, 1, m.attrs(labelKey{kind: 3, broker: s.Broker, a: f.Rule, b: f.Direction}, func() []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("broker", s.Broker), attribute.String("rule", f.Rule),
				attribute.String("direction", f.Direction)}
		}))
	}
	if s.Orphan != "" {
		m.orphans.Add(ctx, 1, m.attrs(labelKey{kind: 4, broker: s.Broker, a: s.Orphan}, func() []attribute.KeyValue {
			return []attribute.KeyValue{attribute.String("broker", s.Broker), attribute.String("decision", s.Orphan)}
		}))
	}
}

// BrokerCall records one broker call's duration; statusClass is "2xx" …
// "5xx", or "error" when no answer came.
func (m *Metrics) BrokerCall(broker string, endpoint rules.Endpoint, statusClass string, d time.Duration) {
	if m == nil {
		return
	}
	opt := m.attrs(labelKey{kind: 5, broker: broker, endpoint: endpoint, a: statusClass}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("broker", broker), attribute.String("endpoint", endpoint.String()),
			attribute.String("status_class", statusClass)}
	})
	m.broker.Record(context.Background(), d.Seconds(), opt)
}

// StoreError counts a failed state store operation; op names it from a
// fixed set ("lock", "release", "poll", "sweep", …), never an id.
func (m *Metrics) StoreError(op string) {
	if m == nil {
		return
	}
	m.storeErrs.Add(context.Background(), 1, m.attrs(labelKey{kind: 6, a: op}, func() []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("op", op)}
	}))
}

// AuditWriteError counts an audit record that could not be written.
func (m *Metrics) AuditWriteError() {
	if m == nil {
		return
	}
	m.auditErrs.Add(context.Background(), 1)
}

// Transport wraps a broker transport so that each call's duration, until
// its response body is closed, is recorded with BrokerCall.
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
	broker, ep := "", rules.Unknown
	if s := ScopeFrom(req.Context()); s != nil {
		broker, ep = s.Broker, s.Call.Endpoint
	}
	start := t.m.now()
	res, err := t.rt.RoundTrip(req)
	if err != nil {
		t.m.BrokerCall(broker, ep, "error", t.m.now().Sub(start))
		return nil, err
	}
	class := statusClass(res.StatusCode)
	res.Body = &doneBody{ReadCloser: res.Body, done: func() { t.m.BrokerCall(broker, ep, class, t.m.now().Sub(start)) }}
	return res, nil
}

// doneBody calls done once, when the body is closed.
type doneBody struct {
	io.ReadCloser
	done func()
	once sync.Once
}

// Close implements io.Closer.
func (b *doneBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// Gauge reports a value read at collection time, such as the operation
// locks held; an error skips the observation and counts as a store error
// of op "observe".
type Gauge func(ctx context.Context) (int64, error)

// ObserveState registers gauges for the operation locks held and the
// asynchronous operations in progress, read from the state store at each
// scrape. Call it once per process; nil functions are skipped.
func (m *Metrics) ObserveState(locks, operations Gauge) error {
	if m == nil {
		return nil
	}
	var errs []error
	for _, g := range []struct {
		name, unit, desc string
		f                Gauge
	}{
		{"osb_gateway.locks.held", "{lock}", "Operation locks held on service instances.", locks},
		{"osb_gateway.operations.in_progress", "{operation}", "Asynchronous broker operations the gateway tracks.", operations},
	} {
		if g.f == nil {
			continue
		}
		f := g.f
		_, err := m.meter.Int64ObservableGauge(g.name, metric.WithDescription(g.desc), metric.WithUnit(g.unit),
			metric.WithInt64Callback(func(ctx context.Context, o metric.Int64Observer) error {
				n, err := f(ctx)
				if err != nil {
					m.StoreError("observe")
					return nil
				}
				o.Observe(n)
				return nil
			}))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ObserveCatalogs registers counters of catalog cache hits, misses and
// stale serves per broker, read at each scrape from the cache current
// returns (the current Gateway's: Switch.Load().Catalogs). Call it once
// per process.
func (m *Metrics) ObserveCatalogs(current func() *CatalogCache) error {
	if m == nil {
		return nil
	}
	hits, err1 := m.meter.Int64ObservableCounter("osb_gateway.catalog.hits", metric.WithUnit("{request}"),
		metric.WithDescription("Catalog requests answered from a fresh cache entry."))
	misses, err2 := m.meter.Int64ObservableCounter("osb_gateway.catalog.misses", metric.WithUnit("{request}"),
		metric.WithDescription("Catalog requests that fetched from the broker."))
	stale, err3 := m.meter.Int64ObservableCounter("osb_gateway.catalog.stale", metric.WithUnit("{request}"),
		metric.WithDescription("Catalog requests answered from a stale entry."))
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	_, err := m.meter.RegisterCallback(func(_ context.Context, o metric.Observer) error {
		c := current()
		if c == nil {
			return nil
		}
		c.mu.Lock()
		stats := make(map[string]*catalogStats, len(c.stats))
		for name, st := range c.stats {
			stats[name] = st
		}
		c.mu.Unlock()
		for name, st := range stats {
			opt := metric.WithAttributeSet(attribute.NewSet(attribute.String("broker", name)))
			o.ObserveInt64(hits, st.hits.Load(), opt)
			o.ObserveInt64(misses, st.misses.Load(), opt)
			o.ObserveInt64(stale, st.stale.Load(), opt)
		}
		return nil
	}, hits, misses, stale)
	return err
}
