// This file runs the protect request kind, run only when -requests names
// it: the per-broker protections under open-loop load, each in front of
// sample brokers of its own.
//
//   - overload: a broker that takes protectLatency per call behind a gateway
//     with brokers[].max_in_flight protectCap and queue_timeout 0s, so the
//     gateway admits at most protectCap calls at once and sheds the rest at
//     once (503: the calls are reads, GET instance). Its capacity is
//     measured first, closed-loop with protectCap connections; then GET
//     instance is sent open-loop (at fixed intervals, whatever the answers)
//     at a quarter of it (unloaded) and at protectOverload times it. The
//     admitted calls' p99 is held to maxAdmittedP99Ratio × the unloaded
//     p99, every shed call to an answer within maxShedLatency, and no call
//     may get anything but 200 or the shedding 503.
//   - outage: a broker that stops answering for outageLength (it holds
//     every call until the caller gives up) behind two gateways with
//     brokers[].timeout outageTimeout, one without a breaker and one with
//     breaker {failures: outageFailures, open_for: outageOpenFor}, each
//     sent GET instance open-loop at outageRate through the outage. The
//     calls sent during the outage are timed: without the breaker every one
//     waits for the timeout; with it, the calls sent before the first
//     failures came back (outageRate × outageTimeout of them) wait for it
//     too, and so does a probe per open_for, while every other call gets
//     the breaker's 503 within maxShedLatency.
//
// Every run is bounded: it sends for a fixed time at a fixed rate and
// waits at most the broker timeout for the last answers.

package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// kindProtect is the protect request kind, as named by -requests.
const kindProtect = "protect"

// The overload scenario.
const (
	protectLatency  = 10 * time.Millisecond // the broker's time per call
	protectCap      = 8                     // brokers[].max_in_flight
	protectOverload = 3                     // the overload, in multiples of the capacity
	protectUnloaded = 0.25                  // the unloaded rate, in multiples of the capacity
)

// The outage scenario.
const (
	outageTimeout  = 250 * time.Millisecond // brokers[].timeout
	outageLength   = time.Second
	outageBefore   = 500 * time.Millisecond // healthy time before the outage, and after it
	outageRate     = 200                    // calls per second
	outageFailures = 5
	outageOpenFor  = 250 * time.Millisecond
)

// protectYAML fronts one broker for tenantName; ${PROTECT} are the
// broker's protection keys, ${TIMEOUT} its timeout.
const protectYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
log: {format: json, level: info}
brokers:
  - name: ` + brokerName + `
    url: ${BROKER_URL}
    username: ` + brokerUser + `
    password: ${BROKER_PASSWORD}
    api_version: {min: "2.13", max: "2.17"}
    timeout: ${TIMEOUT}
${PROTECT}
tenants:
  - name: ` + tenantName + `
    credentials:
      - username: ` + tenantUser + `
        password: ${TENANT_PASSWORD}
    routes:
      - broker: ` + brokerName + `
`

// protectGateway starts a gateway for protectYAML in front of brokerURL,
// observed as serve runs by default (metrics, access log to /dev/null);
// it returns the base URL of the route and a function that stops it.
func protectGateway(brokerURL, timeout, protect string) (string, func(), error) {
	vars := map[string]string{"BROKER_URL": brokerURL, "BROKER_PASSWORD": brokerPass, "TENANT_PASSWORD": tenantPass, "TIMEOUT": timeout}
	yaml := strings.Replace(protectYAML, "${PROTECT}", protect, 1)
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := vars[k]; return v, ok }})
	if err != nil {
		return "", nil, fmt.Errorf("gateway config: %w", err)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return "", nil, err
	}
	access := proxy.NewAccessLog(devNull, "json", slog.LevelInfo)
	access.Buffer(*cfg.Log.AccessFlushInterval)
	m, err := proxy.NewMetrics(prometheus.NewRegistry(), nil)
	if err != nil {
		return "", nil, err
	}
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: access, Metrics: m})
	if err != nil {
		return "", nil, fmt.Errorf("gateway: %w", err)
	}
	base, stop, err := serve("gateway", g)
	if err != nil {
		return "", nil, err
	}
	return base + "/" + tenantName + "/" + brokerName, func() { stop(); g.Close(nil); access.Close(); _ = devNull.Close() }, nil
}

// outageBroker passes calls to a sample broker, except that while down it
// holds each until its caller gives up, as a broker that accepts
// connections and never answers.
type outageBroker struct {
	next http.Handler
	down atomic.Bool
}

func (b *outageBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if b.down.Load() && r.URL.Path != "/v2/catalog" {
		<-r.Context().Done()
		return
	}
	b.next.ServeHTTP(w, r)
}

// protectInstance is the instance every call of the kind fetches.
const protectInstance = "protect-instance"

// startProtectBroker serves a sample broker taking latency per call (with
// down to take it down, when not nil) and creates protectInstance in it.
func startProtectBroker(latency time.Duration, outage *outageBroker) (string, func(), error) {
	b := samplebroker.New(samplebroker.Options{Username: brokerUser, Password: brokerPass, Latency: latency})
	var h http.Handler = b
	if outage != nil {
		outage.next, h = b, outage
	}
	base, stop, err := serve("broker", h)
	if err != nil {
		return "", nil, err
	}
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s"}`, samplebroker.ServiceID, samplebroker.PlanSyncID)
	req, err := http.NewRequest(http.MethodPut, base+"/v2/service_instances/"+protectInstance, strings.NewReader(body))
	if err != nil {
		stop()
		return "", nil, err
	}
	req.Header = brokerHeader()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		stop()
		return "", nil, err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		stop()
		return "", nil, fmt.Errorf("provisioning %s: status %d", protectInstance, res.StatusCode)
	}
	return base, stop, nil
}

// capacity measures what the gateway at url admits per second, closed-loop
// with protectCap connections for d.
func capacity(ctx context.Context, url string, d time.Duration) (float64, error) {
	s, err := load(ctx, spec{url: url, header: platformHeader(), conns: protectCap, warmup: d / 4, measure: d})
	if err != nil {
		return 0, err
	}
	if total(s.errors) > 0 {
		return 0, fmt.Errorf("calibration got %v", sortedErrors(s.errors))
	}
	return float64(s.requests) / s.elapsed.Seconds(), nil
}

// overloadRound is one round of the overload scenario.
type overloadRound struct {
	capacity           float64
	unloaded, overload *openResult
}

// runOverload runs one round of the overload scenario against the gateway
// at base.
func runOverload(ctx context.Context, base string, d time.Duration) (*overloadRound, error) {
	url := base + "/v2/service_instances/" + protectInstance
	c, err := capacity(ctx, url, d)
	if err != nil {
		return nil, err
	}
	r := &overloadRound{capacity: c}
	tr := newClientTransport()
	defer tr.CloseIdleConnections()
	warmPool(ctx, tr, url, 2*protectCap)
	openLoop(ctx, tr, url, platformHeader(), c*protectOverload, d/4, false) // warm-up
	r.unloaded = openLoop(ctx, tr, url, platformHeader(), c*protectUnloaded, 2*d, false)
	r.overload = openLoop(ctx, tr, url, platformHeader(), c*protectOverload, d, false)
	return r, ctx.Err()
}

// runOutage runs the outage scenario against the gateway at base in
// front of b through tr: healthy, down for outageLength, healthy again.
func runOutage(ctx context.Context, tr *http.Transport, base string, b *outageBroker) *openResult {
	url := base + "/v2/service_instances/" + protectInstance
	go func() {
		if sleep(ctx, outageBefore) == nil {
			b.down.Store(true)
			if sleep(ctx, outageLength) == nil {
				b.down.Store(false)
			}
		}
	}()
	r := openLoop(ctx, tr, url, platformHeader(), outageRate, outageBefore+outageLength+outageBefore, true)
	b.down.Store(false)
	return r
}

// runProtect runs the protect kind: rounds rounds of the overload scenario
// of d each, and rounds of the outage scenario per gateway.
func runProtect(ctx context.Context, rounds int, d time.Duration, progress io.Writer) (*protectReport, error) {
	brokerURL, stopBroker, err := startProtectBroker(protectLatency, nil)
	if err != nil {
		return nil, err
	}
	defer stopBroker()
	base, stop, err := protectGateway(brokerURL, "30s", fmt.Sprintf("    max_in_flight: %d\n    queue_timeout: 0s", protectCap))
	if err != nil {
		return nil, err
	}
	defer stop()
	rep := &protectReport{}
	for i := range rounds {
		r, err := runOverload(ctx, base, d)
		if err != nil {
			return nil, fmt.Errorf("overload round %d: %w", i+1, err)
		}
		rep.addOverload(r)
		fmt.Fprintf(progress, "protect overload round %d: capacity %.0f/s; unloaded p99 %s; at %d× admitted %.0f/s p99 %s, shed %.0f/s p99 %s, other %d\n",
			i+1, r.capacity, fmtUS(us(r.unloaded.hist(200).quantile(0.99))), protectOverload,
			float64(r.overload.byStatus[200])/r.overload.elapsed.Seconds(), fmtUS(us(r.overload.hist(200).quantile(0.99))),
			float64(r.overload.byStatus[503])/r.overload.elapsed.Seconds(), fmtUS(us(r.overload.hist(503).quantile(0.99))),
			r.overload.others(200, 503)+r.unloaded.others(200))
	}

	outage := &outageBroker{}
	outURL, stopOut, err := startProtectBroker(0, outage)
	if err != nil {
		return nil, err
	}
	defer stopOut()
	for _, g := range []struct {
		name, protect string
	}{
		{outageNoBreaker, ""},
		{outageBreaker, fmt.Sprintf("    breaker: {failures: %d, open_for: %s, probes: 1}", outageFailures, outageOpenFor)},
	} {
		base, stop, err := protectGateway(outURL, outageTimeout.String(), g.protect)
		if err != nil {
			return nil, err
		}
		// Warm: as many connections as calls can be outstanding (those
		// held for the timeout, and some).
		tr := newClientTransport()
		url := base + "/v2/service_instances/" + protectInstance
		warmPool(ctx, tr, url, 2*outageRate*int(outageTimeout)/int(time.Second))
		openLoop(ctx, tr, url, platformHeader(), outageRate, d/4, false)
		var rs []*openResult
		for i := range rounds {
			r := runOutage(ctx, tr, base, outage)
			if err := ctx.Err(); err != nil {
				stop()
				return nil, err
			}
			rs = append(rs, r)
			one := newOutageRow(g.name, r)
			fmt.Fprintf(progress, "protect outage round %d, %s: %d calls during the outage, p50 %s, p99 %s, %d waited for the timeout\n",
				i+1, g.name, one.Calls, fmtUS(one.P50), fmtUS(one.P99), one.TimedOut)
			if sleep(ctx, outageTimeout) != nil { // the last calls held are over
				break
			}
		}
		tr.CloseIdleConnections()
		stop()
		rep.Outage = append(rep.Outage, newOutageRow(g.name, rs...))
	}
	rep.finish()
	return rep, nil
}
