package proxy

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/observe"
	"github.com/osb-gateway/osb-gateway/proxy/internal/request"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// discardWriter is a reusable ResponseWriter that drops the body, so a
// benchmark measures the gateway, not a recorder.
type discardWriter struct {
	h      http.Header
	status int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *discardWriter) WriteHeader(code int)        { w.status = code }
func (w *discardWriter) reset()                      { clear(w.h); w.status = 0 }

// catalogBytes stands for a broker's precomputed catalog answer.
var catalogBytes = []byte(`{"services":[{"id":"s1","name":"sample","description":"d","bindable":true,"plans":[{"id":"p1","name":"sync","description":"d"}]}]}`)

// lastOperationBytes stands for a broker's answer to a poll.
var lastOperationBytes = []byte(`{"state":"in progress","description":"creating the database"}`)

// benchGateway returns a Gateway in front of an upstream on loopback that
// answers every request with catalogBytes, with access logging on (JSON to
// io.Discard), as in production.
func benchGateway(b *testing.B) *Gateway {
	b.Helper()
	return benchGatewayWith(b, Options{})
}

// benchGatewayWith is benchGateway with opts, its logs as benchGateway's.
func benchGatewayWith(b *testing.B, opts Options) *Gateway {
	b.Helper()
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		if strings.HasSuffix(r.URL.Path, "/last_operation") {
			_, _ = w.Write(lastOperationBytes)
			return
		}
		_, _ = w.Write(catalogBytes)
	}))
	b.Cleanup(up.Close)
	cfg, err := config.Parse([]byte(twoTenantYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		return map[string]string{"B1_URL": up.URL, "B2_URL": up.URL, "BROKER_PASS": brokerPass}[k], true
	}})
	if err != nil {
		b.Fatal(err)
	}
	opts.Logger, opts.AccessLog = slog.New(slog.NewJSONHandler(io.Discard, nil)), NewAccessLog(io.Discard, "json", nil)
	g, err := New(cfg, opts)
	if err != nil {
		b.Fatal(err)
	}
	return g
}

func benchRequest(path string) *http.Request {
	r := httptest.NewRequest("GET", path, nil)
	r.SetBasicAuth(t1User, t1Pass)
	r.Header.Set("X-Broker-API-Version", "2.14")
	return r
}

// BenchmarkProxiedGET is a pass-through GET through the whole chain to a
// loopback upstream. Allocation figures include the upstream's server side.
func BenchmarkProxiedGET(b *testing.B) {
	for _, path := range []string{"/t1/b1/v2/catalog", "/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"} {
		b.Run(path, func(b *testing.B) { benchProxiedGET(b, path) })
	}
}

func benchProxiedGET(b *testing.B, path string) {
	benchServe(b, benchGateway(b), benchRequest(path))
}

// benchServe serves r with h once per iteration, each answer a 200.
func benchServe(b *testing.B, h http.Handler, r *http.Request) {
	w := &discardWriter{h: http.Header{}}
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, r)
		if w.status != 200 {
			b.Fatalf("status %d", w.status)
		}
	}
}

// prefillRoute stands in for the route, auth and version stages: it sets
// the Scope's route to rt, the path to path and the version to the
// broker's newest.
func prefillRoute(rt *route, path string) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			s.Route, s.Tenant, s.Broker, s.Path = rt, auth.TenantOf(rt).Name, upstream.Of(rt).Name, path
			s.Version, s.Forward = upstream.Of(rt).Max, upstream.Of(rt).MaxString
			next.ServeHTTP(w, r)
		})
	}
}

// BenchmarkStage measures each middleware on its own: the scope stage and a
// prefill (standing in for the stages before the one measured) run in
// every variant, so compare each row with "baseline".
func BenchmarkStage(b *testing.B) {
	g := benchGateway(b)
	var rt *route
	for _, u := range g.upstreams {
		if u.Name == "b1" {
			rt = newRoute("/t1/b1", mustTenant(b, &g.cfg.Tenants[0]), u)
		}
	}
	prefill := prefillRoute(rt, "/v2/service_instances/i-1/last_operation")
	routes := routeTable{"/t1/b1": rt}
	terminal := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) })
	stages := []struct {
		name string
		mw   Middleware
	}{
		{"baseline", func(h http.Handler) http.Handler { return h }},
		{"recover", observe.WithRecover(slog.New(slog.DiscardHandler))},
		{"accesslog slog", observe.WithAccessLog(slog.New(slog.NewJSONHandler(io.Discard, nil)), nil, time.Now, nil)},
		{"accesslog", observe.WithAccessLog(nil, NewAccessLog(io.Discard, "json", nil), time.Now, nil)},
		{"bodylimit", request.WithBodyLimit(1 << 20)},
		{"route", withRoute(routes)},
		{"auth", auth.WithAuth(testAuthGate(b, config.Auth{}, time.Now))},
		{"version", request.WithVersion()},
		{"classify", request.WithClassify()},
	}
	for _, st := range stages {
		b.Run(st.name, func(b *testing.B) {
			h := Stack(terminal, withScope(time.Now), prefill, st.mw)
			benchServe(b, h, benchRequest("/t1/b1/v2/service_instances/i-1/last_operation?operation=op1"))
		})
	}
}
