package metrics

import (
	"crypto/x509"
	"sync/atomic"

	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/prometheus/client_golang/prometheus"
)

// The series an operator's alerts read beside the traffic: the build,
// each broker up or down, when certificates expire and how orphan
// mitigations end, and the async operations the gateway settled itself.

// mitigationResults name the result label of
// osb_gateway_orphan_mitigations_total for each result of mitigate.
var mitigationResults = [...]struct{ result, label string }{
	{core.Mitigated, "mitigated"},
	{core.MitigationFail, "failed"},
	{core.MitigationBusy, "busy"},
	{core.MitigationTaken, "claimed"},
	{core.MitigationGone, "cancelled"},
	{core.MitigationDown, "state_unavailable"},
	{core.MitigationAsync, "deleting"},
}

// healthMetrics are those series' instruments.
type healthMetrics struct {
	build       *prometheus.GaugeVec   // version, revision, goversion
	mitigations *prometheus.CounterVec // broker, result
	watched     *prometheus.CounterVec // broker, state
	brokers     *brokerUpCollector
	certs       *certCollector
}

func newHealthMetrics() healthMetrics {
	return healthMetrics{
		build: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "osb_gateway_build_info",
			Help: "Always 1; the labels name the running build: version, VCS revision and Go version."},
			[]string{"version", "revision", "goversion"}),
		mitigations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_orphan_mitigations_total",
			Help: `Orphan mitigation attempts by broker and result: "mitigated", "failed" (the broker did not undo it), "busy", "claimed" (another replica), "cancelled", "state_unavailable", "deleting" (the broker deletes it asynchronously; the next attempt polls it).`},
			[]string{"broker", "result"}),
		watched: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "osb_gateway_operations_settled_by_gateway_total",
			Help: `Asynchronous operations no platform settled that the gateway's own last_operation poll ended (the background reconciler past state.reconcile.after, or an operator's reconcile), by broker and state: "succeeded", "failed" or "gone".`},
			[]string{"broker", "state"}),
		brokers: &brokerUpCollector{desc: prometheus.NewDesc("osb_gateway_broker_up",
			"1 when the broker is taken to be up, 0 when its circuit breaker is open or the latest fetch of its catalog failed.",
			[]string{"broker"}, nil)},
		certs: &certCollector{desc: prometheus.NewDesc("osb_gateway_certificate_expiry_seconds",
			`When a certificate the gateway presents expires (its NotAfter), in Unix seconds, by use ("listener": the platform listener's; "broker": a broker client certificate), broker (for "broker") and subject.`,
			[]string{"use", "broker", "subject"}, nil)},
	}
}

func (h healthMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.build, h.mitigations, h.watched, h.brokers, h.certs}
}

// SetBuildInfo sets osb_gateway_build_info{version,revision,goversion} to
// 1: call it once, at start.
func (m *Metrics) SetBuildInfo(version, revision, goVersion string) {
	if m == nil {
		return
	}
	m.health.build.WithLabelValues(version, revision, goVersion).Set(1)
}

// Mitigation counts one orphan Mitigation of broker that ended in result
// (one of mitigate's results).
func (m *Metrics) Mitigation(broker, result string) {
	if m == nil {
		return
	}
	for _, r := range mitigationResults {
		if r.result == result {
			m.health.mitigations.WithLabelValues(broker, r.label).Inc()
			return
		}
	}
}

// SettledByWatch counts one async operation of broker the gateway's own
// poll ended in state (rules.PollSucceeded, PollFailed or PollGone).
func (m *Metrics) SettledByWatch(broker, state string) {
	if m == nil {
		return
	}
	m.health.watched.WithLabelValues(broker, state).Inc()
}

// ObserveBrokers makes each scrape show osb_gateway_broker_up from up,
// which maps every configured broker to whether it is up (the current
// Gateway's BrokersUp). A later call replaces up; nil shows none.
func (m *Metrics) ObserveBrokers(up func() map[string]bool) {
	if m == nil {
		return
	}
	if up == nil {
		m.health.brokers.up.Store(nil)
		return
	}
	m.health.brokers.up.Store(&up)
}

type brokerUpCollector struct {
	desc *prometheus.Desc
	up   atomic.Pointer[func() map[string]bool]
}

// Describe implements prometheus.Collector.
func (c *brokerUpCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *brokerUpCollector) Collect(ch chan<- prometheus.Metric) {
	up := c.up.Load()
	if up == nil {
		return
	}
	for name, ok := range (*up)() {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, name)
	}
}

// CertExpiry is a certificate whose expiry /metrics shows.
type CertExpiry struct {
	// Use is "listener" or "broker"; Broker names the broker of a broker
	// client certificate ("" for the listener's).
	Use, Broker string
	// Cert is the certificate.
	Cert *x509.Certificate
}

// certSubject names a certificate for the subject label: its first DNS
// name, else its common name, else its serial number.
func certSubject(c *x509.Certificate) string {
	switch {
	case len(c.DNSNames) > 0:
		return c.DNSNames[0]
	case c.Subject.CommonName != "":
		return c.Subject.CommonName
	}
	return "serial " + c.SerialNumber.String()
}

// ObserveCertificates makes each scrape show
// osb_gateway_certificate_expiry_seconds for the certificates each source
// returns then (the listener's, tls.Server.Certificates; the brokers',
// Gateway.BrokerCertificates). A later call replaces the sources; none
// shows none.
func (m *Metrics) ObserveCertificates(sources ...func() []CertExpiry) {
	if m == nil {
		return
	}
	m.health.certs.sources.Store(&sources)
}

type certCollector struct {
	desc    *prometheus.Desc
	sources atomic.Pointer[[]func() []CertExpiry]
}

// Describe implements prometheus.Collector.
func (c *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector. A certificate shown twice (the
// same use, broker and subject) is shown once, with its latest expiry.
func (c *certCollector) Collect(ch chan<- prometheus.Metric) {
	sources := c.sources.Load()
	if sources == nil {
		return
	}
	type key struct{ use, broker, subject string }
	latest := map[key]float64{}
	var order []key
	for _, src := range *sources {
		for _, ce := range src() {
			if ce.Cert == nil {
				continue
			}
			k := key{ce.Use, ce.Broker, certSubject(ce.Cert)}
			t := float64(ce.Cert.NotAfter.Unix())
			if old, ok := latest[k]; !ok {
				order = append(order, k)
				latest[k] = t
			} else if t > old {
				latest[k] = t
			}
		}
	}
	for _, k := range order {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, latest[k], k.use, k.broker, k.subject)
	}
}
