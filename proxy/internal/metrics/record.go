package metrics

import (
	"context"
	"sort"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
)

// Recording a platform call: its series, and the exemplars that tie a
// sampled call to its trace.

// exemplarEvery is how often a request series (each bucket of a duration
// series) takes a new exemplar at most. An exemplar costs about a dozen
// allocations, and a scrape shows only the newest one; a second keeps the
// exemplars fresh for any scrape interval at a bounded cost under 100%
// sampling.
const exemplarEvery = time.Second

// exemplar returns the exemplar labels of a sampled span: trace_id and
// span_id, as OpenTelemetry's Prometheus exporter names them. Exemplars
// show in the protobuf and OpenMetrics formats only.
func exemplar(sc trace.SpanContext) prometheus.Labels {
	return prometheus.Labels{"trace_id": sc.TraceID().String(), "span_id": sc.SpanID().String()}
}

// claim reports whether a series whose newest exemplar was taken at the
// tick in at may take one now, and if so records now there.
func claim(at *atomic.Int64, now int64) bool {
	old := at.Load()
	return (old == 0 || now-old >= int64(exemplarEvery)) && at.CompareAndSwap(old, now)
}

// recordSampled counts a call made under a sampled span, with its trace as
// the exemplar where the series (the bucket) has none newer than
// exemplarEvery.
func (m *Metrics) recordSampled(c *callSeries, d float64, sc trace.SpanContext) {
	now := int64(m.Tick()) | 1 // never 0, which means "no exemplar yet"
	var ex prometheus.Labels
	if c.countEx != nil && claim(&c.countExAt, now) {
		ex = exemplar(sc)
		c.countEx.AddWithExemplar(1, ex)
	} else {
		c.count.Inc()
	}
	if c.durationEx != nil && claim(&c.bucketExAt[sort.SearchFloat64s(durationBuckets[:], d)], now) {
		if ex == nil {
			ex = exemplar(sc)
		}
		c.durationEx.ObserveWithExemplar(d, ex)
	} else {
		c.duration.Observe(d)
	}
}

// inc adds one to c, with the exemplar ex when there is one.
func inc(c prometheus.Counter, ex prometheus.Labels) {
	if a, ok := c.(prometheus.ExemplarAdder); ok && ex != nil {
		a.AddWithExemplar(1, ex)
		return
	}
	c.Inc()
}

// Record counts one served call from its Scope.
func (m *Metrics) Record(ctx context.Context, s *core.Scope, method string) {
	ep := s.LabelEndpoint(method)
	c := m.calls(s.Tenant, s.Broker, ep, s.StatusSent())
	d := m.Since(s.Start).Seconds()
	var sc trace.SpanContext
	if s.TraceParent != "" { // else no trace stage ran: no span to look up
		sc = trace.SpanContextFromContext(ctx)
	}
	if sc.IsSampled() {
		m.recordSampled(c, d, sc)
	} else {
		c.count.Inc()
		c.duration.Observe(d)
	}
	if s.Shield != "" {
		m.Poll(s.Broker, s.Shield)
	}
	if !s.Blocked && len(s.Findings) == 0 && s.Orphan == "" && s.CatalogUnavailable == "" {
		return
	}
	// Rare counters: an exemplar on every sampled one.
	var ex prometheus.Labels
	if sc.IsSampled() {
		ex = exemplar(sc)
	}
	if s.Blocked {
		inc(m.blocked.WithLabelValues(s.Tenant, s.Broker, ep.String()), ex)
	}
	for _, f := range s.Findings {
		inc(m.findings.WithLabelValues(s.Broker, f.Rule, f.Direction), ex)
	}
	if s.Orphan != "" {
		inc(m.orphans.WithLabelValues(s.Broker, s.Orphan), ex)
	}
	if s.CatalogUnavailable != "" {
		inc(m.noCatalog.WithLabelValues(s.Broker, s.CatalogUnavailable), ex)
	}
}
