package proxy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy/internal/metrics"
)

// TestMetricsBindingsExpiring: osb_gateway_bindings_expiring shows every
// configured broker, zero when it has nothing expiring; the store is read
// at most once per ExpiringRefresh whatever the scrapes; a failed read
// keeps the last counts and is counted.
func TestMetricsBindingsExpiring(t *testing.T) {
	p, err := telemetry.Setup(t.Context(), config.Telemetry{}, "test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	clock := osbtest.NewClock(inventoryT0)
	m, err := NewMetrics(p.Registerer, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	if text := scrape(t, p.MetricsHandler()); strings.Contains(text, "osb_gateway_bindings_expiring{") {
		t.Errorf("series before ObserveExpiring:\n%s", text)
	}

	// The gateway's counts, over a store whose broker b has a binding
	// expiring in a day; broker strict (configured, nothing stored) shows
	// 0, broker gone (stored, no longer configured) nothing.
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, clock.Now)
	for _, bd := range []store.Binding{
		{Broker: "strict", InstanceID: "i1", BindingID: "x1", ExpiresAt: inventoryT0.Add(24 * time.Hour)},
		{Broker: "strict", InstanceID: "i1", BindingID: "x2", ExpiresAt: inventoryT0.Add(8 * 24 * time.Hour)}, // beyond 7 days
		{Broker: "gone", InstanceID: "i1", BindingID: "x1", ExpiresAt: inventoryT0.Add(time.Hour)},
	} {
		if _, err := st.PutBinding(context.Background(), bd); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse([]byte(`
brokers:
  - {name: strict, url: "http://127.0.0.1:1", username: u, password: p}
  - {name: quiet, url: "http://127.0.0.1:2", username: u, password: p}
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: strict}, {broker: quiet}]}]
`), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(cfg, Options{Store: st, Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	reads := 0
	var fail error
	m.ObserveExpiring(func(ctx context.Context) (map[string]int, error) {
		reads++
		if fail != nil {
			return nil, fail
		}
		return g.CountExpiringBindings(ctx)
	})
	want := func(what string, lines ...string) {
		t.Helper()
		text := scrape(t, p.MetricsHandler())
		for _, l := range lines {
			if !strings.Contains(text, l+"\n") {
				t.Errorf("%s: /metrics lacks %s", what, l)
			}
		}
		if strings.Contains(text, `broker="gone"`) {
			t.Errorf("%s: /metrics shows a broker no longer configured", what)
		}
	}
	want("first scrape", `osb_gateway_bindings_expiring{broker="quiet"} 0`, `osb_gateway_bindings_expiring{broker="strict"} 1`)
	n := reads
	want("a scrape within the refresh", `osb_gateway_bindings_expiring{broker="strict"} 1`)
	if reads != n {
		t.Errorf("a second scrape within ExpiringRefresh read the store again (%d reads, want %d)", reads, n)
	}
	clock.Advance(2 * 24 * time.Hour) // x1 is past, x2 now within 7 days
	want("after the refresh", `osb_gateway_bindings_expiring{broker="quiet"} 0`, `osb_gateway_bindings_expiring{broker="strict"} 2`)
	if reads != n+1 {
		t.Errorf("%d reads after ExpiringRefresh, want %d", reads, n+1)
	}
	fail = errors.New("store down")
	clock.Advance(metrics.ExpiringRefresh)
	scrape(t, p.MetricsHandler())
	want("after a failed read", `osb_gateway_bindings_expiring{broker="strict"} 2`, `osb_gateway_store_errors_total{op="expiring"} 1`)
	if reads != n+2 {
		t.Errorf("%d reads after a failed one, want %d: a failed read waits for the next refresh", reads, n+2)
	}
	m.ObserveExpiring(nil)
	if text := scrape(t, p.MetricsHandler()); strings.Contains(text, "osb_gateway_bindings_expiring{") {
		t.Errorf("series after ObserveExpiring(nil):\n%s", text)
	}
	var nilMetrics *Metrics
	nilMetrics.ObserveExpiring(nil)
}
