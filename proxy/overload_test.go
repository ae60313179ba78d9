package proxy

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// overloadYAML is limitsYAML without limits and with listen.max_in_flight
// 2.
const overloadYAML = `
listen: {max_in_flight: 2}
admin: {address: "off"}
brokers:
  - name: b1
    url: ${B1_URL}
    validation: {without_catalog: forward}
  - name: b2
    url: ${B2_URL}
    validation: {without_catalog: forward}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b1}, {broker: b2}]
`

// TestOverloadShedsAtOnce: with listen.max_in_flight 2 and two calls held
// at a broker, a third read gets 503 and a third mutating call 429, both
// with Retry-After and at once (the broker is never asked), readiness
// says the gateway is overloaded, a Gateway replacing it by reload counts
// the calls the old one serves; once the two are answered, calls pass
// again.
func TestOverloadShedsAtOnce(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	held := func(w http.ResponseWriter, r *http.Request) {
		select {
		case arrived <- struct{}{}:
		case <-release:
		}
		<-release
		_, _ = io.WriteString(w, `{"state":"succeeded"}`)
	}
	e := newLimitsEnv(t, overloadYAML, held, nil)
	t.Cleanup(unblock) // before the servers close, should the test stop early
	admin := httptest.NewServer(newAdmin(NewSwitch(e.g), slog.New(slog.DiscardHandler), e.g.Overloaded))
	t.Cleanup(admin.Close)
	readyz := func() (int, string) {
		res, body := do(t, "GET", admin.URL+"/readyz", "", "", "", nil)
		return res.StatusCode, body
	}
	if st, body := readyz(); st != 200 {
		t.Fatalf("readyz before: %d %s", st, body)
	}

	done := make(chan int, 2)
	for range 2 {
		go func() {
			req, _ := http.NewRequest("GET", e.gw.URL+"/t1/b1/v2/service_instances/i1/last_operation", nil)
			req.SetBasicAuth("t1-user", "t1-pass")
			req.Header.Set("X-Broker-API-Version", "2.16")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				done <- 0
				return
			}
			res.Body.Close()
			done <- res.StatusCode
		}()
	}
	for i := range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d calls reached the broker", i)
		}
	}

	const desc = "the gateway is overloaded: 2 platform calls are in flight (listen.max_in_flight); this %s was not sent " +
		"to the broker; retry after 1s"
	for _, row := range []struct {
		method, path string
		status       int
		desc         string
	}{
		{"GET", "/t1/b2/v2/service_instances/i1/last_operation", 503, fmt.Sprintf(desc, "read")},
		{"DELETE", "/t1/b2/v2/service_instances/i1?service_id=s&plan_id=p", 429, fmt.Sprintf(desc, "call")},
		{"PUT", "/t1/b2/v2/service_instances/i1", 429, fmt.Sprintf(desc, "call")},
	} {
		var body io.Reader
		if row.method == "PUT" {
			body = strings.NewReader(`{"service_id":"s","plan_id":"p"}`)
		}
		res, got := do(t, row.method, e.gw.URL+row.path, "t1-user", "t1-pass", "2.16", body)
		if res.StatusCode != row.status || res.Header.Get("Retry-After") != "1" {
			t.Errorf("%s while overloaded: %d, Retry-After %q; want %d, 1", row.method, res.StatusCode, res.Header.Get("Retry-After"), row.status)
		}
		if diff := cmp.Diff(`{"description":"`+row.desc+`"}`+"\n", got); diff != "" {
			t.Errorf("%s: body (-want +got):\n%s", row.method, diff)
		}
	}
	if n := len(e.b2.Requests()); n != 0 {
		t.Errorf("%d shed calls reached the broker", n)
	}
	if st, body := readyz(); st != 503 || !strings.Contains(body, "overloaded: 2 platform calls in flight, listen.max_in_flight is 2") {
		t.Errorf("readyz while overloaded: %d %s", st, body)
	}
	reloaded, err := New(e.g.Config(), Options{Previous: e.g, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if reloaded.Overloaded() == nil {
		t.Error("a Gateway replacing the old by reload does not count the old one's calls")
	}

	unblock()
	for range 2 {
		if st := <-done; st != 200 {
			t.Errorf("a held call ended with %d", st)
		}
	}
	waitFor(t, func() bool { return e.g.Overloaded() == nil }) // the count drops after the answer is out
	if res, body := e.poll(t, "b2"); res.StatusCode != 200 {
		t.Errorf("after the load: %d %s", res.StatusCode, body)
	}
	if st, body := readyz(); st != 200 {
		t.Errorf("readyz after: %d %s", st, body)
	}
	for class, want := range map[string]float64{"reads": 1, "mutations": 2} {
		if got := counter(t, e.reg, "osb_gateway_shed_total", map[string]string{"tenant": "t1", "broker": "b2", "class": class}); got != want {
			t.Errorf("shed_total{class=%q} = %v, want %v", class, got, want)
		}
	}
	shed := 0
	for _, r := range e.records.all() {
		if r.Protection == ProtectionOverload {
			shed++
			if r.Outcome != OutcomeRejected || r.Tenant != "t1" || r.Broker != "b2" {
				t.Errorf("audit record of a shed call: %+v", r)
			}
		}
	}
	if shed != 3 {
		t.Errorf("%d audit records say overload, want 3", shed)
	}
}

// TestMaxInFlightDefault: without listen.max_in_flight the cap is
// DefaultMaxInFlightPerCPU per GOMAXPROCS.
func TestMaxInFlightDefault(t *testing.T) {
	g, _ := testGateway(t, twoTenantYAML, env("http://127.0.0.1:1", "http://127.0.0.1:1"))
	if got, want := g.protect.Overload.Max(), int64(config.DefaultMaxInFlightPerCPU*runtime.GOMAXPROCS(0)); got != want {
		t.Errorf("max in flight %d, want %d", got, want)
	}
}
