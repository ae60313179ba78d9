package proxy

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/guard"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// TestBrokerAuthCloseDropsTheSecondCredential: closing a gateway for one
// whose broker has no second credential any more removes the broker's
// credential series.
func TestBrokerAuthCloseDropsTheSecondCredential(t *testing.T) {
	m, err := registeredMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	build := func(b config.Broker, prev *upstream.Upstream) *upstream.Upstream {
		b.Name, b.URL, b.Timeout = "b", "http://127.0.0.1:1", 5e9
		u, err := upstream.New(&b, log, nil, nil, "", features)
		if err != nil {
			t.Fatal(err)
		}
		if u.BrokerAuth != nil {
			u.BrokerAuth.Start(m, prev)
		}
		return u
	}
	moved := build(config.Broker{Username: "u", Password: "next", NextPassword: "later"}, nil)
	if v := seriesValue(m, "osb_gateway_broker_credential", map[string]string{"broker": "b", "which": "current"}); v != 1 {
		t.Errorf(`credential{which="current"} = %v, want 1`, v)
	}
	g := &Gateway{guard: &guard.Guard{Metrics: m}, upstreams: map[string]*upstream.Upstream{"b": moved}}
	g.Close(&Gateway{guard: &guard.Guard{}, upstreams: map[string]*upstream.Upstream{"b": build(config.Broker{Username: "u", Password: "next"}, moved)}})
	if n := testutilCount(m); n != 0 {
		t.Errorf("%d credential series left after the second credential went, want 0", n)
	}
}

func testutilCount(m *Metrics) int {
	return seriesCount(m, "osb_gateway_broker_credential")
}

// TestBrokerAuthNoTokenCountsAsABrokerFailure: a call that gets no OAuth2
// token failed as a call to an unreachable broker does, whatever its
// status (a read's 502, a mutating call's 429), so the breaker opens after
// brokers[].breaker.failures of them and later calls are answered at
// once. The deprovision's 429 leaves no lock and no orphan: it was never
// sent.
func TestBrokerAuthNoTokenCountsAsABrokerFailure(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("client-s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse([]byte(`
admin: {address: "off"}
brokers:
  - name: b
    url: http://`+osbtest.DeadAddr(t)+`
    timeout: 5s
    validation: {without_catalog: forward}
    breaker: {failures: 2, open_for: 1h}
    auth: {type: oauth2, token_url: "http://`+osbtest.DeadAddr(t)+`/token", client_id: gw, client_secret_file: secret}
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clk.Now)
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close(nil) })
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	send := func(method, path string) callReply {
		req, _ := http.NewRequest(method, gw.URL+"/t1/b"+path, nil)
		req.SetBasicAuth("t1-user", "t1-pass")
		req.Header.Set("X-Broker-API-Version", "2.14")
		return roundTrip(req)
	}
	const noToken = `broker \"b\" was not called: its OAuth2 token endpoint could not be reached: it refused the connection`
	if r := send("GET", "/v2/service_instances/i/last_operation"); r.status != 502 || !strings.Contains(r.body, noToken) {
		t.Errorf("poll: %d %s, want 502 saying %s", r.status, r.body, noToken)
	}
	query := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	if r := send("DELETE", "/v2/service_instances/i"+query); r.status != 429 || !strings.Contains(r.body, noToken) {
		t.Errorf("deprovision: %d %s, want 429 saying %s", r.status, r.body, noToken)
	}
	if ls, _ := st.List(context.Background(), store.ListFilter{}); len(ls) != 0 {
		t.Errorf("locks after the deprovision: %+v", ls)
	}
	if orphans, _ := st.ListOrphans(context.Background()); len(orphans) != 0 {
		t.Errorf("orphans after the deprovision: %+v", orphans)
	}
	r := send("GET", "/v2/service_instances/i/last_operation")
	if want := `broker \"b\" is failing: last error: ` + noToken; r.status != 503 || !strings.Contains(r.body, want) {
		t.Errorf("after two calls without a token: %d %s, want 503 from the breaker saying %s", r.status, r.body, want)
	}
}
