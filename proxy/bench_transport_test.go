package proxy

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// BenchmarkTransports compares the broker transports
// (brokers[].transport) on a pass-through GET (a last_operation poll)
// through the whole chain to a loopback broker: each iteration serves the
// call once through a gateway on http.Transport and once through one on
// the lean transport, so both see the same machine at the same moment.
// It reports each one's ns per call and lean/standard, the ratio of the
// two (below 1: lean is faster). "parallel" runs GOMAXPROCS callers.
func BenchmarkTransports(b *testing.B) {
	const path = "/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"
	std := benchGatewayWith(b, Options{BrokerTransport: config.TransportStandard})
	lean := benchGatewayWith(b, Options{BrokerTransport: config.TransportLean})
	report := func(b *testing.B, stdNs, leanNs int64) {
		n := float64(b.N)
		b.ReportMetric(float64(stdNs)/n, "standard-ns/call")
		b.ReportMetric(float64(leanNs)/n, "lean-ns/call")
		b.ReportMetric(float64(leanNs)/float64(stdNs), "lean/standard")
		b.ReportMetric(0, "ns/op") // two calls per op: the figures above are per call
	}
	b.Run("serial", func(b *testing.B) {
		r := benchRequest(path)
		w := &discardWriter{h: http.Header{}}
		var stdNs, leanNs int64
		for b.Loop() {
			stdNs += serveTimed(b, std, w, r)
			leanNs += serveTimed(b, lean, w, r)
		}
		report(b, stdNs, leanNs)
	})
	b.Run("parallel", func(b *testing.B) {
		var stdNs, leanNs atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			r := benchRequest(path)
			w := &discardWriter{h: http.Header{}}
			for pb.Next() {
				stdNs.Add(serveTimed(b, std, w, r))
				leanNs.Add(serveTimed(b, lean, w, r))
			}
		})
		report(b, stdNs.Load(), leanNs.Load())
	})
}

// serveTimed serves r with h into w and returns how long it took.
func serveTimed(b *testing.B, h http.Handler, w *discardWriter, r *http.Request) int64 {
	w.reset()
	start := time.Now()
	h.ServeHTTP(w, r)
	d := time.Since(start)
	if w.status != http.StatusOK {
		b.Fatalf("status %d", w.status)
	}
	return int64(d)
}
