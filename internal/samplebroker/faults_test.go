package samplebroker

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFaultResponses(t *testing.T) {
	catalog := req{method: "GET", path: "/v2/catalog"}
	tests := []struct {
		name       string
		fault      Fault
		req        req
		wantStatus int
		wantBody   string // "" means: any JSON object
	}{
		{name: "status", fault: Fault{Endpoint: EndpointCatalog, Status: 503}, req: catalog, wantStatus: 503},
		{name: "malformed body", fault: Fault{Endpoint: EndpointCatalog, Body: `{"services":[`}, req: catalog,
			wantStatus: 200, wantBody: `{"services":[`},
		{name: "status and body", fault: Fault{Status: 500, Body: `oops`}, req: provisionSync(id),
			wantStatus: 500, wantBody: `oops`},
		{name: "alias last_operation", fault: Fault{Endpoint: EndpointLastOperation, Status: 502}, req: lastOp(id), wantStatus: 502},
		{name: "other endpoint unaffected", fault: Fault{Endpoint: EndpointProvision, Status: 500}, req: catalog, wantStatus: 200},
		{name: "latency only", fault: Fault{Latency: 20 * time.Millisecond}, req: catalog, wantStatus: 200},
		{name: "before version check", fault: Fault{Status: 500},
			req: req{method: "GET", path: "/v2/catalog", version: "-"}, wantStatus: 500},
		{name: "not before authentication", fault: Fault{Status: 500},
			req: req{method: "GET", path: "/v2/catalog", noAuth: true}, wantStatus: 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, Options{})
			if err := f.b.InjectFault(tt.fault); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			r := f.do(tt.req)
			if r.status != tt.wantStatus {
				t.Fatalf("status %d, want %d; body %s", r.status, tt.wantStatus, r.body)
			}
			if tt.wantBody != "" {
				if string(r.body) != tt.wantBody {
					t.Errorf("body %q, want %q", r.body, tt.wantBody)
				}
			} else {
				r.fields(t)
			}
			if d := time.Since(start); d < tt.fault.Latency {
				t.Errorf("answered after %v, want at least %v", d, tt.fault.Latency)
			}
		})
	}
}

func TestFaultCount(t *testing.T) {
	f := newFixture(t, Options{})
	if err := f.b.InjectFault(Fault{Endpoint: EndpointCatalog, Status: 500, Count: 2}); err != nil {
		t.Fatal(err)
	}
	catalog := req{method: "GET", path: "/v2/catalog"}
	var got []int
	for range 3 {
		got = append(got, f.do(catalog).status)
	}
	if diff := cmp.Diff([]int{500, 500, 200}, got); diff != "" {
		t.Errorf("statuses (-want +got)\n%s", diff)
	}
	if fs := f.b.Faults(); len(fs) != 0 {
		t.Errorf("faults left: %v", fs)
	}
	if n := f.b.Count(EndpointCatalog); n != 3 {
		t.Errorf("Count(catalog) = %d, want 3: faulted requests count too", n)
	}
}

func TestFaultHangEndsWithClient(t *testing.T) {
	b := New(Options{})
	done := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.ServeHTTP(w, r)
		done <- struct{}{}
	}))
	defer srv.Close()
	if err := b.InjectFault(Fault{Endpoint: EndpointProvision, Hang: true}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	hr, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL+instancePath(id), nil)
	hr.Header.Set("X-Broker-API-Version", "2.17")
	_, err := srv.Client().Do(hr)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want the client's deadline", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("handler still hanging after the client gave up")
	}
}

func TestFaultValidation(t *testing.T) {
	tests := []struct {
		name  string
		fault Fault
	}{
		{name: "unknown endpoint", fault: Fault{Endpoint: "nope"}},
		{name: "status too low", fault: Fault{Status: 99}},
		{name: "status too high", fault: Fault{Status: 600}},
		{name: "negative latency", fault: Fault{Latency: -time.Second}},
		{name: "negative count", fault: Fault{Count: -1}},
	}
	b := New(Options{})
	for _, tt := range tests {
		if err := b.InjectFault(tt.fault); err == nil {
			t.Errorf("%s: InjectFault accepted %+v", tt.name, tt.fault)
		}
	}
	if fs := b.Faults(); len(fs) != 0 {
		t.Errorf("faults after rejected injections: %v", fs)
	}
}

func TestControlEndpoints(t *testing.T) {
	f := newFixture(t, Options{})
	faults := func() []Fault {
		t.Helper()
		var fs []Fault
		if err := json.Unmarshal(f.must(req{method: "GET", path: "/_sample/fault"}, 200).body, &fs); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	f.must(req{method: "PUT", path: "/_sample/fault", body: `{"endpoint":"catalog","status":500,"latency":"5ms","count":1}`}, 200)
	f.must(req{method: "PUT", path: "/_sample/fault", body: `[{"endpoint":"bind","fail_operation":true},{"hang":true,"endpoint":"unbind"}]`}, 200)
	want := []Fault{
		{Endpoint: "catalog", Status: 500, Latency: 5 * time.Millisecond, Count: 1},
		{Endpoint: "bind", FailOperation: true},
		{Endpoint: "unbind", Hang: true},
	}
	if diff := cmp.Diff(want, faults()); diff != "" {
		t.Errorf("faults (-want +got)\n%s", diff)
	}
	for _, body := range []string{
		`{"endpoint":"nope"}`, `{"latency":"soon"}`, `{"colour":"red"}`, `[{"status":500},{"status":1}]`, `{`, `{} {}`,
	} {
		f.expect(t, req{method: "PUT", path: "/_sample/fault", body: body}, check{status: 400})
	}
	if got := len(faults()); got != 3 {
		t.Errorf("%d faults after rejected PUTs, want 3", got)
	}
	f.must(req{method: "GET", path: "/v2/catalog"}, 500)
	f.must(req{method: "DELETE", path: "/_sample/fault"}, 204)
	if got := faults(); len(got) != 0 {
		t.Errorf("faults after DELETE: %v", got)
	}

	f.must(req{method: "GET", path: "/v2/catalog"}, 200)
	f.must(req{method: "GET", path: "/v2/catalog", noAuth: true}, 401)
	f.must(provisionSync(id), 201)
	var stats map[string]int64
	if err := json.Unmarshal(f.must(req{method: "GET", path: "/_sample/stats"}, 200).body, &stats); err != nil {
		t.Fatal(err)
	}
	if stats[EndpointCatalog] != 3 || stats[EndpointProvision] != 1 || stats[EndpointBind] != 0 || len(stats) != int(numEndpoints) {
		t.Errorf("stats %v, want catalog 3, provision 1, bind 0 and every endpoint", stats)
	}
	f.must(req{method: "DELETE", path: "/_sample/stats"}, 204)
	if n := f.b.Count(""); n != 0 {
		t.Errorf("Count(\"\") = %d after reset", n)
	}
}
