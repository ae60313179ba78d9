package samplebroker

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// discardWriter is a reusable http.ResponseWriter that keeps only the status,
// so that handler benchmarks measure the broker and not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (d *discardWriter) WriteHeader(status int)      { d.status = status }

func (d *discardWriter) reset() {
	clear(d.h)
	d.status = 0
}

// hotRequests returns a broker with an in-progress async instance and the
// two hot-path requests against it.
func hotRequests(tb testing.TB) (b *Broker, catalog, lastOperation *http.Request) {
	tb.Helper()
	b = New(Options{Username: testUser, Password: testPass})
	newReq := func(method, target, body string) *http.Request {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		r := httptest.NewRequest(method, target, rd)
		r.Header.Set("X-Broker-API-Version", "2.17")
		r.SetBasicAuth(testUser, testPass)
		return r
	}
	w := &discardWriter{h: http.Header{}}
	b.ServeHTTP(w, newReq("PUT", instancePath(id)+"?accepts_incomplete=true", provisionBody(ServiceID, PlanAsyncID, "")))
	if w.status != http.StatusAccepted {
		tb.Fatalf("provision: %d", w.status)
	}
	return b, newReq("GET", "/v2/catalog", ""), newReq("GET", instancePath(id)+"/last_operation"+query(ServiceID, PlanAsyncID), "")
}

// TestHotPathAllocations guards the cost of the two hot paths.
func TestHotPathAllocations(t *testing.T) {
	b, catalog, lastOperation := hotRequests(t)
	for _, tt := range []struct {
		name string
		r    *http.Request
		max  float64
	}{
		{"catalog", catalog, 0},
		{"last_operation", lastOperation, 0},
	} {
		w := &discardWriter{h: http.Header{}}
		got := testing.AllocsPerRun(100, func() {
			w.reset()
			b.ServeHTTP(w, tt.r)
		})
		if w.status != http.StatusOK || got > tt.max {
			t.Errorf("%s: status %d, %.1f allocations per request, want at most %.0f", tt.name, w.status, got, tt.max)
		}
	}
}

func benchmarkHotPath(b *testing.B, pick func(catalog, lastOperation *http.Request) *http.Request) {
	broker, catalog, lastOperation := hotRequests(b)
	r := pick(catalog, lastOperation)
	b.Run("handler", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			w := &discardWriter{h: http.Header{}}
			for pb.Next() {
				w.reset()
				broker.ServeHTTP(w, r)
				if w.status != http.StatusOK {
					b.Fatalf("status %d", w.status)
				}
			}
		})
	})
	b.Run("loopback", func(b *testing.B) {
		srv := httptest.NewServer(broker)
		defer srv.Close()
		client := srv.Client()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				out, _ := http.NewRequest(r.Method, srv.URL+r.URL.RequestURI(), nil)
				out.Header = r.Header
				resp, err := client.Do(out)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
		})
	})
}

func BenchmarkCatalog(b *testing.B) {
	benchmarkHotPath(b, func(c, _ *http.Request) *http.Request { return c })
}

func BenchmarkLastOperation(b *testing.B) {
	benchmarkHotPath(b, func(_, l *http.Request) *http.Request { return l })
}

// BenchmarkProvisionDeprovision measures a synchronous provision and
// deprovision, the mutating path, plain and with each campaign option on.
func BenchmarkProvisionDeprovision(b *testing.B) {
	for _, tt := range []struct {
		name string
		opts func(b *testing.B) Options
	}{
		{"plain", func(*testing.B) Options { return Options{} }},
		{"call_log", func(*testing.B) Options { return Options{CallLog: io.Discard} }},
		{"state_file", func(b *testing.B) Options { return Options{StateFile: b.TempDir() + "/state.jsonl"} }},
	} {
		b.Run(tt.name, func(b *testing.B) {
			broker, err := Open(tt.opts(b))
			if err != nil {
				b.Fatal(err)
			}
			defer broker.Close()
			put := httptest.NewRequest("PUT", instancePath(id), nil)
			del := httptest.NewRequest("DELETE", instancePath(id)+query(ServiceID, PlanSyncID), nil)
			for _, r := range []*http.Request{put, del} {
				r.Header.Set("X-Broker-API-Version", "2.17")
			}
			body := provisionBody(ServiceID, PlanSyncID, "")
			w := &discardWriter{h: http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				w.reset()
				put.Body = io.NopCloser(strings.NewReader(body))
				broker.ServeHTTP(w, put)
				if w.status != http.StatusCreated {
					b.Fatalf("provision: %d", w.status)
				}
				w.reset()
				broker.ServeHTTP(w, del)
				if w.status != http.StatusOK {
					b.Fatalf("deprovision: %d", w.status)
				}
			}
		})
	}
}
