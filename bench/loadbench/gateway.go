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
	"os"
	"sync/atomic"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/telemetry"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// gatewayYAML is a realistic configuration: one tenant with basic auth
// (and bcryptTenant, whose credential is a bcrypt hash, for auth-flood),
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
  - name: ` + bcryptTenant + `
    credentials:
      - username: ` + tenantUser + `
        password: "${TENANT_HASH}"
    routes:
      - broker: ` + brokerName + `
`

// newGateway starts the real gateway (proxy.New) in front of the brokers at
// urls (by gatewayYAML variable), logging access lines as JSON to
// /dev/null through a buffered writer, as serve writes them to standard
// error by default. It returns the gateway's base URL, the
// gateway itself (to serve it on more listeners) and a function that stops
// both.
func newGateway(urls map[string]string) (string, http.Handler, func(), error) {
	gw, err := buildGateway(urls, observe{})
	if err != nil {
		return "", nil, nil, err
	}
	base, stop, err := serve("gateway", gw.handler)
	if err != nil {
		gw.close()
		return "", nil, nil, fmt.Errorf("gateway: %w", err)
	}
	return base, gw.handler, func() { stop(); gw.close() }, nil
}

// observe says how a gateway is observed. The zero value is how
// osb-gateway serve runs by default: tracing with exporter none (no trace
// stage; a platform's traceparent passes through), metrics, no audit.
type observe struct {
	// off leaves every observing part out: no Options.Tracing, Metrics or
	// Audit (the access log stays, as for every gateway).
	off bool
	// sampleRatio, when positive, configures a real span exporter (a
	// counting one that discards, behind the SDK's batch span processor)
	// and samples new traces at this ratio.
	sampleRatio float64
	// auditPath, when not empty, writes the audit log to this file (file
	// sink, fsync interval).
	auditPath string
	// store, when not nil, keeps the operation locks (proxy.Options.Store);
	// nil: the gateway's own in-memory store. The caller closes it.
	store store.Store
	// transport, when not nil, replaces every broker's transport (an
	// in-process benchmark's canned answers); the observing wrappers go
	// around it.
	transport http.RoundTripper
	// poll is the sample broker's brokers[].poll (poll-shield).
	poll config.Poll
}

// gatewayInstance is a gateway not yet served.
type gatewayInstance struct {
	handler http.Handler
	// spans flushes the batch span processor and returns how many spans
	// the exporter has received so far; nil without a real exporter.
	spans func() int64
	close func()
}

// buildGateway makes the real gateway in front of the brokers at urls,
// observed as o says.
func buildGateway(urls map[string]string, o observe) (*gatewayInstance, error) {
	hash, err := tenantHash()
	if err != nil {
		return nil, err
	}
	vars := map[string]string{"BROKER_PASSWORD": brokerPass, "TENANT_PASSWORD": tenantPass, "TENANT_HASH": hash}
	maps.Copy(vars, urls)
	cfg, err := config.Parse([]byte(gatewayYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	for i := range cfg.Brokers {
		if cfg.Brokers[i].Name == brokerName {
			cfg.Brokers[i].Poll = o.poll
		}
	}
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	// The access lines go through the operating system as serve's go to
	// standard error: to /dev/null, buffered as log.access_flush_interval
	// says (its default here).
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return nil, err
	}
	access := proxy.NewAccessLog(devNull, "json", slog.LevelInfo)
	access.Buffer(*cfg.Log.AccessFlushInterval)
	opts := proxy.Options{Logger: log, AccessLog: access, Store: o.store}
	closers := []func(){func() { access.Close(); _ = devNull.Close() }}
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	inst := &gatewayInstance{}
	if !o.off {
		var topts []telemetry.Option
		var exp *countingExporter
		if o.sampleRatio > 0 {
			r := o.sampleRatio
			cfg.Telemetry.Traces.Exporter = config.TraceExporterStdout
			cfg.Telemetry.Traces.SampleRatio = &r
			exp = &countingExporter{}
			topts = append(topts, telemetry.WithSpanExporter(exp))
		}
		// As osb-gateway serve runs: the access log (JSON, buffered, to /dev/null),
		// tracing, metrics, the audit log when configured, and the
		// in-memory operation state.
		prov, err := telemetry.Setup(context.Background(), cfg.Telemetry, "bench", topts...)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %w", err)
		}
		closers = append(closers, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = prov.Shutdown(ctx)
		})
		if exp != nil {
			// The batch span processor exports when its batch is full or
			// its timer fires; flushing before counting makes the count
			// exact at both ends of a measured period.
			flusher, _ := prov.TracerProvider.(interface{ ForceFlush(context.Context) error })
			inst.spans = func() int64 {
				if flusher != nil {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					_ = flusher.ForceFlush(ctx)
					cancel()
				}
				return exp.spans.Load()
			}
		}
		m, err := proxy.NewMetrics(prov.Registerer, nil)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("metrics: %w", err)
		}
		opts.Metrics = m
		// As serve: with exporter none (o.sampleRatio 0) no trace stage and
		// no broker-call spans.
		if o.sampleRatio > 0 {
			opts.Tracing = &proxy.Tracing{Provider: prov.TracerProvider, Propagator: prov.Propagator}
		}
		if o.auditPath != "" {
			w, err := audit.Open(config.Audit{Sink: config.AuditSinkFile, Path: o.auditPath,
				MaxSize: auditMaxSize, MaxFiles: auditMaxFiles, Fsync: config.AuditFsyncInterval,
				FsyncInterval: config.DefaultAuditFsyncInterval, Parameters: config.AuditParametersKeys},
				audit.Options{OnError: func(error) { m.AuditWriteError() }})
			if err != nil {
				closeAll()
				return nil, fmt.Errorf("audit: %w", err)
			}
			closers = append(closers, func() { _ = w.Close() })
			opts.Audit = &proxy.AuditOptions{Writer: w, ParameterKeys: true}
		}
	}
	if o.transport != nil {
		// In place of each broker's own transport, inside the client span
		// and the metering.
		opts.Transport = func(http.RoundTripper) http.RoundTripper { return o.transport }
	}
	g, err := proxy.New(cfg, opts)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("gateway: %w", err)
	}
	inst.handler = g
	// The gateway stops before the audit log and the exporters flush.
	closers = append(closers, func() { g.Close(nil) })
	inst.close = closeAll
	return inst, nil
}

// The audit log's rotation in the tracing kind keeps the disk it uses
// bounded: at most auditMaxFiles+1 files of auditMaxSize per gateway.
const (
	auditMaxSize  = "32MiB"
	auditMaxFiles = 2
)

// countingExporter is a span exporter that counts the spans it receives and
// discards them: the spans are recorded and go through the batch span
// processor as with any exporter, without the cost of a collector.
type countingExporter struct{ spans atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.spans.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }
