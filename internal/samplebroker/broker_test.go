package samplebroker

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// Test credentials.
const (
	testUser = "platform"
	testPass = "s3cret"
)

// fixture is a broker behind a real loopback listener.
type fixture struct {
	t     testing.TB
	b     *Broker
	srv   *httptest.Server
	clock *osbtest.Clock
}

// newFixture starts a broker. Unless opts says otherwise it authenticates
// with testUser/testPass and runs on a fake clock.
func newFixture(t testing.TB, opts Options) *fixture {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if opts.Now == nil {
		opts.Now = clock.Now
	}
	if opts.Username == "" {
		opts.Username, opts.Password = testUser, testPass
	}
	b := New(opts)
	srv := httptest.NewServer(b)
	t.Cleanup(srv.Close)
	return &fixture{t: t, b: b, srv: srv, clock: clock}
}

// req is one request in a test. Zero fields mean: version 2.17, the test
// credentials, no body.
type req struct {
	method, path, body string
	version            string // "" means 2.17, "-" means no header
	header             map[string]string
	noAuth             bool
}

// response is what came back.
type response struct {
	status int
	header http.Header
	body   []byte
}

// fields decodes the body as a JSON object.
func (r response) fields(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", r.body, err)
	}
	return m
}

// str returns a top-level string field of the body.
func (r response) str(t testing.TB, key string) string {
	t.Helper()
	s, _ := r.fields(t)[key].(string)
	return s
}

func (f *fixture) do(rq req) response {
	f.t.Helper()
	var body io.Reader
	if rq.body != "" {
		body = strings.NewReader(rq.body)
	}
	hr, err := http.NewRequest(rq.method, f.srv.URL+rq.path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	switch rq.version {
	case "":
		hr.Header.Set("X-Broker-API-Version", "2.17")
	case "-":
	default:
		hr.Header.Set("X-Broker-API-Version", rq.version)
	}
	if !rq.noAuth {
		hr.SetBasicAuth(testUser, testPass)
	}
	for k, v := range rq.header {
		hr.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(hr)
	if err != nil {
		f.t.Fatalf("%s %s: %v", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// must performs rq and fails the test unless the status is want.
func (f *fixture) must(rq req, want int) response {
	f.t.Helper()
	r := f.do(rq)
	if r.status != want {
		f.t.Fatalf("%s %s: status %d, want %d; body %s", rq.method, rq.path, r.status, want, r.body)
	}
	return r
}

// Paths and bodies.

func instancePath(id string) string { return "/v2/service_instances/" + id }

func bindingPath(iid, bid string) string { return instancePath(iid) + "/service_bindings/" + bid }

func provisionBody(serviceID, planID, params string) string {
	s := `{"service_id":"` + serviceID + `","plan_id":"` + planID +
		`","organization_guid":"org","space_guid":"space","context":{"platform":"cloudfoundry"}`
	if params != "" {
		s += `,"parameters":` + params
	}
	return s + "}"
}

func bindBody(serviceID, planID, params string) string {
	s := `{"service_id":"` + serviceID + `","plan_id":"` + planID + `","bind_resource":{"app_guid":"app"}`
	if params != "" {
		s += `,"parameters":` + params
	}
	return s + "}"
}

func query(serviceID, planID string) string { return "?service_id=" + serviceID + "&plan_id=" + planID }

// Requests used by many tests.

func provisionSync(id string) req {
	return req{method: "PUT", path: instancePath(id), body: provisionBody(ServiceID, PlanSyncID, "")}
}

func provisionAsync(id string) req {
	return req{method: "PUT", path: instancePath(id) + "?accepts_incomplete=true", body: provisionBody(ServiceID, PlanAsyncID, "")}
}

func lastOp(id string) req {
	return req{method: "GET", path: instancePath(id) + "/last_operation"}
}

// check is one expectation of a table row: status and, when set, the OSB
// error code.
type check struct {
	status int
	code   string
}

func (f *fixture) expect(t *testing.T, rq req, want check) response {
	t.Helper()
	r := f.do(rq)
	got := check{status: r.status}
	if len(r.body) > 0 && r.status != http.StatusNotModified {
		got.code = r.str(t, "error")
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(check{})); diff != "" {
		t.Errorf("%s %s: (-want +got)\n%s\nbody: %s", rq.method, rq.path, diff, r.body)
	}
	if ct := r.header.Get("Content-Type"); r.status != http.StatusNotModified && ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	return r
}

func TestAuth(t *testing.T) {
	tests := []struct {
		name   string
		header map[string]string
		noAuth bool
		want   int
	}{
		{name: "right credentials", want: http.StatusOK},
		{name: "lower-case scheme", noAuth: true,
			header: map[string]string{"Authorization": "basic cGxhdGZvcm06czNjcmV0"}, want: http.StatusOK},
		{name: "none", noAuth: true, want: http.StatusUnauthorized},
		{name: "wrong password", noAuth: true,
			header: map[string]string{"Authorization": "Basic cGxhdGZvcm06d3Jvbmc="}, want: http.StatusUnauthorized},
		{name: "bearer", noAuth: true, header: map[string]string{"Authorization": "Bearer x"}, want: http.StatusUnauthorized},
	}
	f := newFixture(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(req{method: "GET", path: "/v2/catalog", header: tt.header, noAuth: tt.noAuth})
			if r.status != tt.want {
				t.Fatalf("status %d, want %d", r.status, tt.want)
			}
			if tt.want == http.StatusUnauthorized {
				if got := r.header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Basic ") {
					t.Errorf("WWW-Authenticate %q", got)
				}
				if r.str(t, "description") == "" {
					t.Errorf("401 body %s has no description", r.body)
				}
			}
		})
	}
	t.Run("control endpoints", func(t *testing.T) {
		f.must(req{method: "GET", path: "/_sample/stats", noAuth: true}, http.StatusUnauthorized)
		f.must(req{method: "GET", path: "/_sample/stats"}, http.StatusOK)
	})
	t.Run("disabled", func(t *testing.T) {
		srv := httptest.NewServer(New(Options{}))
		defer srv.Close()
		hr, _ := http.NewRequest("GET", srv.URL+"/v2/catalog", nil)
		hr.Header.Set("X-Broker-API-Version", "2.17")
		resp, err := srv.Client().Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d without auth configured, want 200", resp.StatusCode)
		}
	})
}

func TestVersion(t *testing.T) {
	tests := []struct {
		name    string
		min     string
		version string
		want    int
	}{
		{name: "current", version: "2.17", want: http.StatusOK},
		{name: "oldest", version: "2.0", want: http.StatusOK},
		{name: "newer minor", version: "2.99", want: http.StatusOK},
		{name: "missing", version: "-", want: http.StatusPreconditionFailed},
		{name: "empty", version: " ", want: http.StatusPreconditionFailed},
		{name: "malformed", version: "two", want: http.StatusPreconditionFailed},
		{name: "other major", version: "3.0", want: http.StatusPreconditionFailed},
		{name: "below minimum", min: "2.13", version: "2.12", want: http.StatusPreconditionFailed},
		{name: "at minimum", min: "2.13", version: "2.13", want: http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var opts Options
			if tt.min != "" {
				_ = opts.MinVersion.UnmarshalText([]byte(tt.min))
			}
			f := newFixture(t, opts)
			r := f.expect(t, req{method: "GET", path: "/v2/catalog", version: tt.version}, check{status: tt.want})
			if tt.want != http.StatusOK && !strings.Contains(r.str(t, "description"), "X-Broker-API-Version") {
				t.Errorf("description %q does not name the header", r.str(t, "description"))
			}
		})
	}
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name, method, path string
		want               int
		allow              string
	}{
		{name: "root", method: "GET", path: "/", want: http.StatusNotFound},
		{name: "unknown v2", method: "GET", path: "/v2/nothing", want: http.StatusNotFound},
		{name: "empty instance id", method: "PUT", path: "/v2/service_instances/", want: http.StatusNotFound},
		{name: "deep path", method: "GET", path: bindingPath("i", "b") + "/last_operation/x", want: http.StatusNotFound},
		{name: "POST catalog", method: "POST", path: "/v2/catalog", want: http.StatusMethodNotAllowed, allow: "GET"},
		{name: "POST instance", method: "POST", path: instancePath("i"), want: http.StatusMethodNotAllowed, allow: "DELETE, GET, PATCH, PUT"},
		{name: "PATCH binding", method: "PATCH", path: bindingPath("i", "b"), want: http.StatusMethodNotAllowed, allow: "DELETE, GET, PUT"},
		{name: "PUT last_operation", method: "PUT", path: instancePath("i") + "/last_operation", want: http.StatusMethodNotAllowed, allow: "GET"},
		{name: "unknown control", method: "GET", path: "/_sample/nothing", want: http.StatusNotFound},
		{name: "POST control", method: "POST", path: "/_sample/stats", want: http.StatusMethodNotAllowed, allow: "DELETE, GET"},
	}
	f := newFixture(t, Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.expect(t, req{method: tt.method, path: tt.path}, check{status: tt.want})
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow %q, want %q", got, tt.allow)
			}
		})
	}
	if got := f.b.Count(EndpointUnknown); got != 8 {
		t.Errorf("Count(unknown) = %d, want 8 (control requests are not counted)", got)
	}
}

func TestRequestIdentityEcho(t *testing.T) {
	const id = "e26cea8e-dc5f-4b35-9c11-7b3eebd0d1e4"
	for _, legacy := range []bool{false, true} {
		f := newFixture(t, Options{Legacy: legacy})
		for _, rq := range []req{
			{method: "GET", path: "/v2/catalog"},
			{method: "GET", path: "/v2/catalog", version: "-"}, // errors too
		} {
			rq.header = map[string]string{"X-Broker-API-Request-Identity": id}
			r := f.do(rq)
			want := id
			if legacy {
				want = "" // a 2.8 broker predates the header
			}
			if got := r.header.Get("X-Broker-API-Request-Identity"); got != want {
				t.Errorf("legacy=%v status %d: echoed %q, want %q", legacy, r.status, got, want)
			}
		}
	}
}

func TestLatency(t *testing.T) {
	f := newFixture(t, Options{Latency: 50 * time.Millisecond})
	start := time.Now()
	f.must(req{method: "GET", path: "/v2/catalog"}, http.StatusOK)
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Errorf("answered after %v, want at least 50ms", d)
	}
}
