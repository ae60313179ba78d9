package metrics

import (
	"errors"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/rules"
)

// statusClasses label metrics by status class, indexed by code/100 (0 for
// codes outside 100–599); brokerError is the broker series' extra class
// for calls that got no answer.
var statusClasses = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

const (
	numClasses       = len(statusClasses)
	brokerError      = numClasses // index of "error" in the broker series
	numBrokerClasses = numClasses + 1
	brokerErrorClass = "error"
)

// classIndex maps a status to its index in statusClasses.
func classIndex(code int) int {
	if c := code / 100; c >= 1 && c <= 5 {
		return c
	}
	return 0
}

// numEndpoints bounds rules.Endpoint; endpointIndex maps values outside
// the defined set to Unknown, as Endpoint.String does.
const numEndpoints = int(rules.BindingLastOperation) + 1

func endpointIndex(e rules.Endpoint) int {
	if int(e) >= numEndpoints {
		return int(rules.Unknown)
	}
	return int(e)
}

// Metrics are the gateway's instruments, all Prometheus client
// instruments on the registry /metrics serves. Label sets are bounded:
// tenant and broker names come from the configuration, endpoints and rule
// ids from fixed tables, never ids or paths. A nil *Metrics records
// nothing, so stages may call its methods unconditionally. Safe for
// concurrent use; build one per process and share it across reloads.
//
// This file has the instruments and the metrics stage; the broker calls
// are timed by the transport of transport.go, and the values read
// at scrape time (catalog cache counters, locks, operations, expiring
// bindings) by the collectors of scrape.go and expiring.go.
// The request and broker series are resolved once per label combination
// and cached, so a call costs a map lookup on (tenant, broker) and a few
// atomic adds.
type Metrics struct {
	now   func() time.Time // nil: the real clock, read as cheaply as it can be
	clock core.Clock       // now, read as ticks (the broker calls' timings)

	InFlight      atomic.Int64 // read by the in-flight gauge at scrape time
	requests      *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	broker        *prometheus.HistogramVec
	blocked       *prometheus.CounterVec
	findings      *prometheus.CounterVec
	orphans       *prometheus.CounterVec
	noCatalog     *prometheus.CounterVec
	polls         *prometheus.CounterVec
	auditErrs     prometheus.Counter
	state         *stateCollector        // the store errors, locks held and operations in progress
	catalogs      *catalogCollector      // the catalog cache counters
	expiring      *expiringCollector     // the bindings expiring soon
	instances     *instancesCollector    // the live instances per plan (instances.go)
	protect       protectMetrics         // rate-limited and shed calls (protect.go)
	health        healthMetrics          // build, brokers up, certificates, orphan mitigations (health.go)
	brokerProtect *brokerProtectMetrics  // the per-broker caps and breakers (brokerprotect.go)
	brokerCred    *prometheus.GaugeVec   // the basic credential in use per broker (brokerauth.go)
	tokenFetches  *prometheus.CounterVec // OAuth2 token fetches per broker and outcome (brokerauth.go)
	drift         *prometheus.GaugeVec   // catalog drift items by broker and kind (drift.go)
	quotaUsed     *prometheus.GaugeVec   // instances counted against each quota (proxy/internal/guard/quota.go)
	policies      *prometheus.CounterVec // calls policies denied (the policy stage)

	// routes and brokers cache the request and broker series; readers
	// load the map without locking, writers copy it under mu.
	routes  atomic.Pointer[map[routeKey]*routeSeries]
	brokers atomic.Pointer[map[string]*brokerSeries]
	mu      sync.Mutex
}

// routeKey is one (tenant, broker) pair.
type routeKey struct{ tenant, broker string }

// routeSeries are one (tenant, broker) pair's request series, by endpoint
// and status code, each made on first use (the codes a call may end with
// are not known before). Per endpoint, readers load the code map without
// locking; writers copy it under Metrics.mu.
type routeSeries struct {
	key   routeKey
	calls [numEndpoints]atomic.Pointer[map[int]*callSeries]
}

// callSeries are the request counter and duration histogram of one label
// combination.
type callSeries struct {
	count      prometheus.Counter
	countEx    prometheus.ExemplarAdder // count's exemplar side; nil: none
	duration   prometheus.Observer
	durationEx prometheus.ExemplarObserver // nil: none
	// countExAt and bucketExAt are the ticks at which the counter and each
	// duration bucket (+Inf last) last took an exemplar; 0: never.
	countExAt  atomic.Int64
	bucketExAt [len(durationBuckets) + 1]atomic.Int64
}

// brokerSeries are one broker's call duration series, by endpoint and
// status class (brokerError: no answer), and its poll counters, by
// shieldAnswers, each made on first use.
type brokerSeries struct {
	name  string
	calls [numEndpoints][numBrokerClasses]atomic.Pointer[observer]
	polls [len(shieldAnswers)]atomic.Pointer[prometheus.Counter]
}

type observer struct{ prometheus.Observer }

// durationBuckets are the histogram boundaries, in seconds: OSB calls take
// from milliseconds (cached catalogs) to a broker timeout (60s).
var durationBuckets = [...]float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// NewMetrics creates the instruments and registers them on reg
// (telemetry.Providers.Registerer; nil registers them nowhere, as when
// metrics are disabled). now is the clock (nil: the real clock) and must
// be the gateway's (Options.Now).
func NewMetrics(reg prometheus.Registerer, now func() time.Time) (*Metrics, error) {
	m := &Metrics{now: now, state: newStateCollector(), catalogs: newCatalogCollector(), brokerProtect: newBrokerProtectMetrics()}
	m.state.now = now
	m.clock.Now = now
	m.expiring = newExpiringCollector(now, m.state.errs)
	m.instances = newInstancesCollector(now, m.state.errs)
	m.routes.Store(&map[routeKey]*routeSeries{})
	m.brokers.Store(&map[string]*brokerSeries{})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_requests_total",
		Help: "Platform calls by tenant, broker, endpoint and status code."},
		[]string{"tenant", "broker", "endpoint", "code"})
	inFlight := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "osb_gateway_requests_in_flight",
		Help: "Platform calls being served."}, func() float64 { return float64(m.InFlight.Load()) })
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "osb_gateway_request_duration_seconds",
		Help: "Time from receiving a platform call to its answer, by tenant, broker, endpoint and status code.", Buckets: durationBuckets[:]},
		[]string{"tenant", "broker", "endpoint", "code"})
	m.broker = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "osb_gateway_broker_duration_seconds",
		Help: `Broker calls by broker, endpoint and status class ("error": no answer).`, Buckets: durationBuckets[:]},
		[]string{"broker", "endpoint", "status_class"})
	m.blocked = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_blocked_total",
		Help: "Calls refused because another operation on the instance is in progress."},
		[]string{"tenant", "broker", "endpoint"})
	m.findings = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_findings_total",
		Help: "OSB rules broken, by broker, rule id and direction (request or response)."},
		[]string{"broker", "rule", "direction"})
	m.orphans = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_orphan_candidates_total",
		Help: "Failed provisions and binds that need orphan mitigation, by broker and decision."},
		[]string{"broker", "decision"})
	m.noCatalog = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_catalog_unavailable_total",
		Help: "Mutating calls that needed the broker's catalog when none could be had, by broker and decision (refused or forwarded)."},
		[]string{"broker", "decision"})
	m.polls = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_polls_total",
		Help: `last_operation polls that reached the upstream, by broker and answer: "forwarded" (the poll's own broker call), "shared" (another poll's call in flight) or "reused" (an in progress answer within poll.min_interval).`},
		[]string{"broker", "answer"})
	m.auditErrs = prometheus.NewCounter(prometheus.CounterOpts{Name: "osb_gateway_audit_write_errors_total",
		Help: "Audit records that could not be written."})
	m.protect = newProtectMetrics()
	m.health = newHealthMetrics()
	m.drift = newDriftGauge()
	m.quotaUsed = newQuotaGauge()
	m.policies = newPolicyMetric()
	m.brokerCred = newBrokerCredentialGauge()
	m.tokenFetches = newTokenFetchCounter()
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.requests, inFlight, m.duration, m.broker, m.blocked, m.findings,
		m.orphans, m.noCatalog, m.polls, m.auditErrs, m.state, m.catalogs, m.expiring, m.instances, m.protect.limited, m.protect.shed, m.protect.owner, m.drift, m.quotaUsed, m.policies, m.brokerCred, m.tokenFetches} {
		errs = append(errs, reg.Register(c))
	}
	for _, c := range append(m.brokerProtect.collectors(), m.health.collectors()...) {
		errs = append(errs, reg.Register(c))
	}
	return m, errors.Join(errs...)
}

// Since returns the time elapsed Since t, which the gateway's clock gave.
// On the real clock that is one monotonic clock read (time.Since), where
// time.Now reads the wall clock too.
func (m *Metrics) Since(t time.Time) time.Duration { return m.clock.Since(t) }

// Tick reads m's clock as an offset from epoch; the difference of two
// ticks is the time between them.
func (m *Metrics) Tick() time.Duration { return m.clock.Tick() }

// route returns the series cache of a (tenant, broker) pair, adding it on
// first use.
func (m *Metrics) route(tenant, broker string) *routeSeries {
	k := routeKey{tenant, broker}
	if r := (*m.routes.Load())[k]; r != nil {
		return r
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.routes.Load()
	if r := old[k]; r != nil {
		return r
	}
	r := &routeSeries{key: k}
	next := make(map[routeKey]*routeSeries, len(old)+1)
	maps.Copy(next, old)
	next[k] = r
	m.routes.Store(&next)
	return r
}

// calls returns the request series of one label combination; code is the
// status sent (codeLabel names it).
func (m *Metrics) calls(tenant, broker string, ep rules.Endpoint, code int) *callSeries {
	r := m.route(tenant, broker)
	slot := &r.calls[endpointIndex(ep)]
	if byCode := slot.Load(); byCode != nil {
		if c := (*byCode)[code]; c != nil {
			return c
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var old map[int]*callSeries
	if p := slot.Load(); p != nil {
		old = *p
	}
	if c := old[code]; c != nil {
		return c
	}
	label := codeLabel(code)
	c := &callSeries{
		count:    m.requests.WithLabelValues(r.key.tenant, r.key.broker, ep.String(), label),
		duration: m.duration.WithLabelValues(r.key.tenant, r.key.broker, ep.String(), label),
	}
	c.countEx, _ = c.count.(prometheus.ExemplarAdder)
	c.durationEx, _ = c.duration.(prometheus.ExemplarObserver)
	next := make(map[int]*callSeries, len(old)+1)
	maps.Copy(next, old)
	next[code] = c
	slot.Store(&next)
	return c
}

// codeLabel is the code label of a status: its three digits, or "other"
// outside 100–599.
func codeLabel(code int) string {
	if code < 100 || code > 599 {
		return "other"
	}
	return strconv.Itoa(code)
}

// brokerCalls returns the broker duration series of one label combination;
// class indexes statusClasses, or is brokerError.
func (m *Metrics) brokerCalls(broker string, ep rules.Endpoint, class int) prometheus.Observer {
	b := m.brokerSeries(broker)
	slot := &b.calls[endpointIndex(ep)][class]
	if o := slot.Load(); o != nil {
		return o.Observer
	}
	name := brokerErrorClass
	if class < numClasses {
		name = statusClasses[class]
	}
	o := &observer{m.broker.WithLabelValues(b.name, ep.String(), name)}
	slot.Store(o)
	return o.Observer
}

// brokerSeries returns the series cache of a broker, adding it on first
// use.
func (m *Metrics) brokerSeries(broker string) *brokerSeries {
	if b := (*m.brokers.Load())[broker]; b != nil {
		return b
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	old := *m.brokers.Load()
	if b := old[broker]; b != nil {
		return b
	}
	b := &brokerSeries{name: broker}
	next := make(map[string]*brokerSeries, len(old)+1)
	maps.Copy(next, old)
	next[broker] = b
	m.brokers.Store(&next)
	return b
}

// shieldAnswers are the values of Scope.Shield, the answer label of
// osb_gateway_polls_total.
var shieldAnswers = [...]string{core.ShieldForwarded, core.ShieldShared, core.ShieldReused}

// Poll counts a last_operation Poll of broker answered as answer (one of
// shieldAnswers).
func (m *Metrics) Poll(broker, answer string) {
	i := 0
	for i < len(shieldAnswers) && shieldAnswers[i] != answer {
		i++
	}
	if i == len(shieldAnswers) {
		return
	}
	slot := &m.brokerSeries(broker).polls[i]
	c := slot.Load()
	if c == nil {
		// The vector returns the same child for the same labels, so a
		// racing caller stores an equal value.
		cc := m.polls.WithLabelValues(broker, answer)
		c = &cc
		slot.Store(c)
	}
	(*c).Inc()
}

// AuditWriteError counts an audit record that could not be written.
func (m *Metrics) AuditWriteError() {
	if m == nil {
		return
	}
	m.auditErrs.Inc()
}

// StoreError counts a failed state store operation; op names it from a
// fixed set ("lock", "release", "poll", "sweep", …), never an id.
func (m *Metrics) StoreError(op string) {
	if m == nil {
		return
	}
	m.state.errs.WithLabelValues(op).Inc()
}
