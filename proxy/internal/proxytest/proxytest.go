// Package proxytest holds what the tests of proxy/ and its packages share:
// waiting for a condition, a call read whole, and reading metrics series.
// Only tests import it.
package proxytest

import (
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// metricsRegs maps the Metrics that RegisteredMetrics built to their
// registries, so that tests read a series by name and labels.
var metricsRegs sync.Map // *metrics.Metrics → *prometheus.Registry

// RegisteredMetrics is NewMetrics on a registry of its own, which
// SeriesValue and SeriesCount read.
func RegisteredMetrics(now func() time.Time) (*metrics.Metrics, error) {
	reg := prometheus.NewRegistry()
	m, err := metrics.NewMetrics(reg, now)
	if err == nil {
		metricsRegs.Store(m, reg)
	}
	return m, err
}

// SeriesValue is the value of the series of family name with labels in
// m's registry (m built by RegisteredMetrics): a counter's or a gauge's;
// -1 when there is no such series.
func SeriesValue(m *metrics.Metrics, name string, labels map[string]string) float64 {
	found := series(m, name, labels)
	if len(found) == 0 {
		return -1
	}
	if c := found[0].GetCounter(); c != nil {
		return c.GetValue()
	}
	return found[0].GetGauge().GetValue()
}

// SeriesCount is the number of series of family name in m's registry.
func SeriesCount(m *metrics.Metrics, name string) int { return len(series(m, name, nil)) }

func series(m *metrics.Metrics, name string, labels map[string]string) []*dto.Metric {
	reg, ok := metricsRegs.Load(m)
	if !ok {
		panic("SeriesValue: the Metrics were not built by RegisteredMetrics")
	}
	out, err := Matching(reg.(*prometheus.Registry), name, labels)
	if err != nil {
		panic(err)
	}
	return out
}

// Matching returns the series of family name in g whose labels include
// want.
func Matching(g prometheus.Gatherer, name string, want map[string]string) ([]*dto.Metric, error) {
	mfs, err := g.Gather()
	if err != nil {
		return nil, err
	}
	var out []*dto.Metric
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, s := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range s.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if have[k] != v {
					continue next
				}
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// WaitFor waits until cond holds, for at most 5 seconds, polling it every
// 10 ms; the test fails if it does not.
func WaitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Reply is the answer to a call, read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   string
	Err    error
}

// Do makes the call req and reads its Reply.
func Do(req *http.Request) Reply {
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Reply{Status: res.StatusCode, Header: res.Header, Body: string(b)}
}
