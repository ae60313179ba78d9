// This file starts the real gateway (proxy.New) with a realistic
// configuration in front of the benchmark's brokers.

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// gatewayYAML is a realistic configuration: one tenant with basic auth,
// brokers with credentials, JSON access logs at info level. The pass-through
// kinds use the sample broker; the catalog cache's brokers (cache.go) keep
// their catalogs for an hour, so a run never sees one expire.
const gatewayYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
log: {format: json, level: info}
brokers:
  - name: ` + brokerName + `
    url: ${BROKER_URL}
    username: ` + brokerUser + `
    password: ${BROKER_PASSWORD}
    api_version: {min: "2.13", max: "2.17"}
    timeout: 30s
  - name: ` + composedName + `
    url: ${COMPOSED_URL}
    username: ` + brokerUser + `
    password: ${BROKER_PASSWORD}
    api_version: {min: "2.13", max: "2.17"}
    timeout: 30s
    catalog: {ttl: 1h}
  - name: ` + largeName + `
    url: ${LARGE_URL}
    username: ` + brokerUser + `
    password: ${BROKER_PASSWORD}
    api_version: {min: "2.13", max: "2.17"}
    timeout: 30s
    catalog: {ttl: 1h}
tenants:
  - name: ` + tenantName + `
    credentials:
      - username: ` + tenantUser + `
        password: ${TENANT_PASSWORD}
    routes:
      - broker: ` + brokerName + `
      - broker: ` + composedName + `
      - broker: ` + largeName + `
`

// newGateway starts the real gateway (proxy.New) in front of the brokers at
// urls (by gatewayYAML variable), logging access lines as JSON to
// io.Discard, as in production. It returns the gateway's base URL and a
// function that stops it.
func newGateway(urls map[string]string) (string, func(), error) {
	vars := map[string]string{"BROKER_PASSWORD": brokerPass, "TENANT_PASSWORD": tenantPass}
	maps.Copy(vars, urls)
	cfg, err := config.Parse([]byte(gatewayYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		return "", nil, fmt.Errorf("gateway config: %w", err)
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// As osb-gateway serve runs by default: the access log (JSON, to
	// io.Discard), tracing with exporter none (spans made, trace context
	// propagated), metrics, and the in-memory operation state.
	prov, err := telemetry.Setup(context.Background(), cfg.Telemetry, "bench")
	if err != nil {
		return "", nil, fmt.Errorf("telemetry: %w", err)
	}
	m, err := proxy.NewMetrics(prov.MeterProvider, nil)
	if err != nil {
		return "", nil, fmt.Errorf("metrics: %w", err)
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: log, AccessLog: proxy.NewAccessLog(io.Discard, "json", slog.LevelInfo),
		Outer: []proxy.Middleware{proxy.TraceStage(prov.TracerProvider, prov.Propagator), m.Stage()},
		Transport: func(rt http.RoundTripper) http.RoundTripper {
			return m.Transport(proxy.InstrumentTransport(rt, prov.TracerProvider, prov.Propagator))
		}, Metrics: m})
	if err != nil {
		return "", nil, fmt.Errorf("gateway: %w", err)
	}
	base, stop, err := serve("gateway", g)
	if err != nil {
		g.Close(nil)
		return "", nil, fmt.Errorf("gateway: %w", err)
	}
	return base, func() { stop(); g.Close(nil) }, nil
}
