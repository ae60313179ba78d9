package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
)

// benchWriter is a ResponseWriter that drops the body.
type benchWriter struct {
	h      http.Header
	status int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *benchWriter) WriteHeader(code int)        { w.status = code }

// BenchmarkChain drives the bare proxy's and the gateway's handlers
// directly (no client socket) against the in-process sample broker, in
// parallel, and reports the process CPU per request: gateway − bare is the
// chain's cost without the noise of a load generator.
func BenchmarkChain(b *testing.B) {
	e, err := newEnv(testLargeSize)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	path, err := e.requestPath(kindLastOperation)
	if err != nil {
		b.Fatal(err)
	}
	type variant struct {
		name   string
		prefix string
		o      *observe
	}
	variants := []variant{
		{name: "bare"},
		{name: "bare-headers"},
		{name: "bare-h-reqid"},
		{name: "bare-h-tp"},
		{name: "bare-h-xff"},
		{name: "bare-h-modify"},
		{name: "gateway", prefix: "/" + tenantName + "/" + brokerName, o: &observe{}},
		{name: "gateway-off", prefix: "/" + tenantName + "/" + brokerName, o: &observe{off: true}},
		{name: "gateway-1pct-audit", prefix: "/" + tenantName + "/" + brokerName, o: &observe{sampleRatio: 0.01}},
		{name: "catalog-cached", prefix: "/" + tenantName + "/" + brokerName, o: &observe{}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			var h http.Handler
			p := path
			if v.o == nil {
				rp, tr, err := bareProxy(e.broker.base)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(tr.CloseIdleConnections)
				if strings.HasPrefix(v.name, "bare-h-") {
					rw := rp.Rewrite
					rp.Rewrite = func(pr *httputil.ProxyRequest) {
						rw(pr)
						switch v.name {
						case "bare-h-reqid":
							pr.Out.Header["X-Broker-Api-Request-Identity"] = []string{"5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"}
						case "bare-h-tp":
							pr.Out.Header["Traceparent"] = []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
						case "bare-h-xff":
							pr.Out.Header["X-Forwarded-For"] = []string{"127.0.0.1"}
						}
					}
					if v.name == "bare-h-modify" {
						rp.ModifyResponse = func(res *http.Response) error {
							res.Header["X-Broker-Api-Request-Identity"] = []string{"5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"}
							return nil
						}
					}
				}
				if v.name == "bare-headers" {
					rw := rp.Rewrite
					rp.Rewrite = func(pr *httputil.ProxyRequest) {
						rw(pr)
						pr.Out.Header["X-Broker-Api-Request-Identity"] = []string{"5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"}
						pr.Out.Header["Traceparent"] = []string{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"}
						pr.Out.Header["X-Forwarded-For"] = []string{"127.0.0.1"}
					}
					rp.ModifyResponse = func(res *http.Response) error {
						res.Header["X-Broker-Api-Request-Identity"] = []string{"5f0c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"}
						return nil
					}
				}
				h = rp
			} else {
				o := *v.o
				if o.sampleRatio > 0 {
					o.auditPath = filepath.Join(b.TempDir(), "audit.log")
				}
				gw, err := buildGateway(e.urls, o)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(gw.close)
				h = gw.handler
				p = v.prefix + path
			}
			if v.name == "catalog-cached" {
				p = v.prefix + "/v2/catalog"
			}
			hdr := platformHeader()
			run := func(n int) {
				r := httptest.NewRequest("GET", p, nil)
				r.Header = hdr.Clone()
				w := &benchWriter{h: http.Header{}}
				for range n {
					clear(w.h)
					h.ServeHTTP(w, r)
					if w.status != 200 {
						b.Fatalf("status %d", w.status)
					}
				}
			}
			run(100)
			cpu0, _ := cpuTime(nil)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequest("GET", p, nil)
				r.Header = hdr.Clone()
				w := &benchWriter{h: http.Header{}}
				for pb.Next() {
					clear(w.h)
					h.ServeHTTP(w, r)
					if w.status != 200 {
						b.Errorf("status %d", w.status)
						return
					}
				}
			})
			b.StopTimer()
			cpu1, _ := cpuTime(nil)
			b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N)/1000, "cpu-µs/op")
		})
	}
}

// cannedTransport answers every request with a broker's answer to a poll,
// without a socket.
type cannedTransport struct{}

func (cannedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: 200, Status: "200 OK", ProtoMajor: 1, ProtoMinor: 1, Proto: "HTTP/1.1",
		Header:        http.Header{"Content-Type": {"application/json"}, "Content-Length": {"52"}, "Date": {"Mon, 23 Nov 2026 10:00:00 GMT"}},
		Body:          io.NopCloser(strings.NewReader(`{"state":"in progress","description":"provisioning"}`)),
		ContentLength: 52, Request: r}, nil
}

// BenchmarkChainCanned is BenchmarkChain with every broker answered by
// cannedTransport: one goroutine, no sockets, so ns/op is the handler's own
// CPU and gateway − bare is the chain's. gateway-bolt keeps its operation
// state in a bolt file, as osb-gateway serve does by default.
func BenchmarkChainCanned(b *testing.B) {
	e, err := newEnv(testLargeSize)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	path, err := e.requestPath(kindLastOperation)
	if err != nil {
		b.Fatal(err)
	}
	prefix := "/" + tenantName + "/" + brokerName
	for _, v := range []struct {
		name string
		o    *observe
	}{
		{"bare", nil},
		{"gateway", &observe{}},
		{"gateway-off", &observe{off: true}},
		{"gateway-1pct-audit", &observe{sampleRatio: 0.01}},
		{"gateway-100pct-audit", &observe{sampleRatio: 1}},
		{"gateway-bolt", &observe{}},
	} {
		b.Run(v.name, func(b *testing.B) {
			var h http.Handler
			p := path
			if v.o == nil {
				rp, _, err := bareProxy(e.broker.base)
				if err != nil {
					b.Fatal(err)
				}
				rp.Transport = cannedTransport{}
				h = rp
			} else {
				o := *v.o
				o.transport = cannedTransport{}
				if v.name == "gateway-bolt" {
					st, err := backend.Open(store.Config{Backend: store.BackendBolt, Path: filepath.Join(b.TempDir(), "state.db"), OpenTimeout: time.Second}, time.Now)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = st.Close() })
					o.store = st
				}
				if o.sampleRatio > 0 {
					o.auditPath = filepath.Join(b.TempDir(), "audit.log")
				}
				gw, err := buildGateway(e.urls, o)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(gw.close)
				h, p = gw.handler, prefix+path
			}
			r := httptest.NewRequest("GET", p, nil)
			r.Header = platformHeader()
			w := &benchWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
				if w.status != 200 {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	}
}
