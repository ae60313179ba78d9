// Checks that the benchmark keeps working: wrk's and vegeta's reports are
// read, rounds are dropped and ratios taken as documented, and a tiny run
// (direct and the gateway, one round of a second) prints its table when
// wrk is installed. Nothing here asserts on performance.

package main

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const wrkOutput = `Running 5s test @ http://127.0.0.1:8080/v2/catalog
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     2.61ms  812.00us  20.00ms   90.00%
    Req/Sec    24.57k     1.02k   26.00k    80.00%
  Latency Distribution
     50%  812.00us
     75%    2.80ms
     90%    3.10ms
     99%    1.20s
  122850 requests in 5.00s, 20.00MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:  24569.88
Transfer/sec:      4.00MB
`

func TestParseWrk(t *testing.T) {
	got, err := parseWrk(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	want := wrkResult{requests: 122850, rps: 24569.88, p50: 812 * time.Microsecond, p99: 1200 * time.Millisecond, failed: 7}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(wrkResult{})); diff != "" {
		t.Errorf("parseWrk (-want +got):\n%s", diff)
	}
	if _, err := parseWrk("unable to connect to 127.0.0.1:1 Connection refused\n"); err == nil {
		t.Error("parseWrk of a failed run: no error")
	}
}

func TestParseVegeta(t *testing.T) {
	got, err := parseVegeta([]byte(`{"latencies":{"total":1,"mean":2,"50th":150000,"90th":1,"95th":1,"99th":420000,"max":1,"min":1},` +
		`"requests":20000,"rate":2000.1,"throughput":2000,"success":1,"status_codes":{"200":20000},"errors":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	want := vegetaResult{rate: 2000.1, p50: 150 * time.Microsecond, p99: 420 * time.Microsecond, success: 1, requests: 20000, errors: []string{}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(vegetaResult{}, used{})); diff != "" {
		t.Errorf("parseVegeta (-want +got):\n%s", diff)
	}
}

// TestRoundsDroppedAndRatios: the round where direct moved 20 % from its
// median is dropped, and × bare proxy is the median of the kept rounds'
// ratios, not the ratio of medians.
func TestRoundsDroppedAndRatios(t *testing.T) {
	s := func(rps float64) sample {
		return sample{wrkResult: wrkResult{rps: rps, requests: int64(rps)}, used: used{cpu: time.Second}}
	}
	r := &report{rounds: []map[string]sample{
		{keyDirect: s(1000), keyBare: s(400), keyGateway: s(300)},
		{keyDirect: s(1000), keyBare: s(500), keyGateway: s(450)},
		{keyDirect: s(800), keyBare: s(100), keyGateway: s(100)}, // dropped
		{keyDirect: s(1050), keyBare: s(600), keyGateway: s(480)},
	}}
	kept := r.kept()
	if diff := cmp.Diff([]int{0, 1, 3}, kept); diff != "" {
		t.Errorf("kept rounds (-want +got):\n%s", diff)
	}
	got, ok := r.ratio(keyGateway, keyBare, kept)
	if !ok || got != 0.8 { // 0.75, 0.9, 0.8
		t.Errorf("gateway × bare = %v, %v; want 0.8, true", got, ok)
	}
	if _, ok := r.ratio(keyGateway, keyNginx, kept); ok {
		t.Error("gateway × nginx without nginx: reported")
	}
}

// TestTinyRun runs the tool end to end: the direct server and the gateway
// built and started as processes, one round of a second under wrk, one
// connection for a second; no open loop (vegeta needs a build from the
// module proxy). Skipped where wrk is not installed: the benchmark is not
// a CI requirement.
func TestTinyRun(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk is not installed (apt-get install wrk)")
	}
	if testing.Short() {
		t.Skip("builds the gateway and runs wrk")
	}
	var log bytes.Buffer
	o, err := parseFlags([]string{"-targets", "direct,gateway", "-rounds", "1", "-duration", "1s", "-warmup", "0",
		"-conns", "4", "-latency-duration", "1s", "-open-duration", "0", "-install=false"}, &log)
	if err != nil {
		t.Fatalf("flags: %v: %s", err, log.String())
	}
	o.logf = t.Logf
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, o, &out); err != nil {
		t.Fatal(err)
	}
	md := out.String()
	for _, want := range []string{
		"| direct (Go server, precomputed bytes) | ",
		"| osb-gateway, default configuration | ",
		"kept 1 of 1 rounds",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(line, "| osb-gateway") && strings.Count(line, "| – ") > 2 {
			t.Errorf("gateway row with missing figures: %s", line)
		}
	}
}

// TestLatencyRoundsAndTargets: added latencies are medians of each round's
// difference from direct, and the targets section checks each figure
// against #18's target.
func TestLatencyRoundsAndTargets(t *testing.T) {
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	s := func(rps float64, cpu time.Duration, p50 time.Duration) sample {
		return sample{wrkResult: wrkResult{rps: rps, requests: int64(rps), p50: p50}, used: used{cpu: cpu, sys: cpu / 4, switches: int64(rps / 2)}}
	}
	v := func(p99 time.Duration) vegetaResult {
		return vegetaResult{rate: 2000, success: 1, p99: p99, requests: 20000,
			used: used{cpu: 400 * time.Millisecond, sys: 100 * time.Millisecond, switches: 30000}}
	}
	r := &report{
		opts: &options{rate: 2000},
		targets: []*target{{key: keyDirect, name: "direct"}, {key: keyNginx, name: "nginx"}, {key: keyBare, name: "bare"},
			{key: keyGateway, name: "gateway"}, {key: keyStandard, name: "standard"}},
		rounds: []map[string]sample{{
			keyDirect: s(1000, time.Second, 0), keyNginx: s(600, time.Second, 0), keyBare: s(400, time.Second, 0),
			keyGateway: s(540, 2*time.Second, 0), keyStandard: s(390, time.Second, 0),
		}},
		single: []map[string]sample{
			{keyDirect: s(0, 0, ms(0.05)), keyNginx: s(0, 0, ms(0.10)), keyGateway: s(0, 0, ms(0.20))},
			{keyDirect: s(0, 0, ms(0.10)), keyNginx: s(0, 0, ms(0.14)), keyGateway: s(0, 0, ms(0.15))},
			{keyDirect: s(0, 0, ms(0.05)), keyNginx: s(0, 0, ms(0.09)), keyGateway: s(0, 0, ms(0.12))},
		},
		open: []map[string]vegetaResult{
			{keyDirect: v(ms(1)), keyGateway: v(ms(1.2))},
			{keyDirect: v(ms(2)), keyGateway: v(ms(2.9))},
			{keyDirect: v(ms(1)), keyGateway: v(ms(1.3))},
		},
	}
	if d, ok := addedDur(r.single, keyGateway, func(s sample) time.Duration { return s.p50 }); !ok || d != ms(0.07) {
		t.Errorf("gateway's added p50 = %v, %v; want 70µs (median of 150, 50, 70 µs)", d, ok)
	}
	var out bytes.Buffer
	r.writeTargets(&out, r.kept())
	for _, want := range []string{
		"| gateway (default configuration) × bare proxy | 1.35× | ≥ 1.30× | yes | 1.35× to 1.35× | 1 of 1 |",
		"| gateway (default configuration) × nginx | 0.90× | ≥ 0.50× | yes | 0.90× to 0.90× | 1 of 1 |",
		"| gateway on transport: standard × bare proxy (the default chain on http.Transport) | 0.97× | ≥ 0.95× | yes | 0.97× to 0.97× | 1 of 1 |",
		// 2 s / 540 against 1 s / 600
		"| gateway CPU per request ÷ nginx's | 2.22× | ≤ 2.50× | yes | 2.22× to 2.22× | 1 of 1 |",
		// gateway 150, 50, 70 µs over direct; nginx 50, 40, 40 µs: each
		// round's margin under twice nginx's +50, -30, -10 µs
		"| gateway's added p50 at 1 connection | +0.070 ms | ≤ 2 × nginx's (+0.080 ms) | yes | -0.030 ms to +0.050 ms against 2 × nginx's | 2 of 3 |",
		// 0.2, 0.9, 0.3 ms over direct
		"| gateway's added p99 at 2000 req/s, open loop | +0.300 ms | ≤ +0.400 ms | yes | +0.200 ms to +0.900 ms | 2 of 3 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("targets section lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	r.open[1][keyGateway] = vegetaResult{rate: 2000, success: 1, p99: ms(2.9), requests: 20000,
		used: used{cpu: time.Second, sys: 700 * time.Millisecond, switches: 150000}}
	r.writeOpen(&out)
	// 0.4 + 1 + 0.4 s of CPU over 60,000 requests, 0.1 + 0.7 + 0.1 s of it
	// kernel, 30,000 + 150,000 + 30,000 switches; direct 1.2 s, 0.3 s,
	// 90,000
	for _, want := range []string{
		"| direct | 2000 | 100.00 % | 0.000 ms | 1.000 ms | – | – | 20.0 | 5.0 | 1.50 |",
		"| gateway | 2000 | 100.00 % | 0.000 ms | 1.300 ms | +0.000 ms | +0.300 ms | 30.0 | 15.0 | 3.50 |",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("open-loop table lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	r.write(&out)
	// gateway: 2 s over 540 requests, a quarter of it kernel, 270 switches
	if want := "| gateway | 540 | 0.54 | 1.35 | 0.90 | 3703.7 | 925.9 | 0.50 | 0.150 ms | +0.070 ms |"; !strings.Contains(out.String(), want) {
		t.Errorf("report lacks %q:\n%s", want, out.String())
	}
	r.rounds[0][keyStandard] = s(300, time.Second, 0)
	out.Reset()
	r.writeTargets(&out, r.kept())
	if want := "| gateway on transport: standard × bare proxy (the default chain on http.Transport) | 0.75× | ≥ 0.95× | no |"; !strings.Contains(out.String(), want) {
		t.Errorf("targets section lacks %q:\n%s", want, out.String())
	}
}
