package proxy

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/protect"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
)

// BenchmarkStageProtect measures the overload and rate-limit stages on
// top of the scope, route fields and classify stages ("classify" is that
// base alone): local limits of the tenant, of the tenant and its route,
// and a shared limit against a redis-server on loopback (one round trip).
// The limits' clock moves 1 µs per call, so a bucket of a million calls
// per second never runs dry.
func BenchmarkStageProtect(b *testing.B) {
	const poll = "/v2/service_instances/i-1/last_operation"
	const huge = "{rate: 1000000, burst: 1000}"
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	for _, row := range []struct {
		name, tenant, route, scope string
	}{
		{"classify", "", "", ""},
		{"overload", "", "", ""},
		{"ratelimit local tenant", huge, "", "local"},
		{"ratelimit local tenant+route", huge, huge, "local"},
		{"ratelimit cluster tenant", huge, "", "cluster"},
	} {
		b.Run(row.name, func(b *testing.B) {
			rt, p := benchProtection(b, row.tenant, row.route, row.scope)
			mw := Middleware(func(h http.Handler) http.Handler { return h })
			switch {
			case row.name == "overload":
				mw = protect.WithOverload(p.Overload)
			case row.tenant != "":
				mw = protect.WithRateLimit(p)
			}
			h := Stack(terminal, withScope(time.Now), prefillRoute(rt, poll), request.WithClassify(), mw)
			benchServe(b, h, benchRequest("/t1/b1"+poll+"?operation=op1"))
		})
	}
}

// benchProtection builds the route /t1/b1 of a tenant whose reads are
// limited by tenantLimit and routeLimit ("": none) at scope, and its
// protection; a cluster scope starts a redis-server.
func benchProtection(b *testing.B, tenantLimit, routeLimit, scope string) (*route, *protect.Protection) {
	b.Helper()
	state := "memory"
	st, err := backend.Open(store.Config{Backend: store.BackendMemory}, nil)
	if scope == config.LimitScopeCluster {
		r := storetest.StartRedis(b)
		state = fmt.Sprintf("redis, redis: {addrs: [%q]}", r.Addr)
		st, err = backend.Open(store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{r.Addr}}}, nil)
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	limits := func(rate string) string {
		if rate == "" {
			return ""
		}
		return fmt.Sprintf(", limits: {reads: %s, scope: %s}", rate, scope)
	}
	yaml := fmt.Sprintf(`
admin: {address: "off"}
state: {backend: %s}
brokers: [{name: b1, url: "http://127.0.0.1:1"}]
tenants:
  - {name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b1%s}]%s}
`, state, limits(routeLimit), limits(tenantLimit))
	cfg, err := config.Parse([]byte(yaml), config.Options{})
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(cfg, Options{Store: st, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	rt := newRoute("/t1/b1", mustTenant(b, &cfg.Tenants[0]), g.upstreams["b1"])
	var ticks atomic.Int64
	base := time.Now()
	now := func() time.Time { return base.Add(time.Duration(ticks.Add(1)) * time.Microsecond) }
	p, err := protect.NewProtection(cfg, map[string]*core.Route{"/t1/b1": rt}, st, protect.ProtectionOptions{Now: now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	return rt, p
}
