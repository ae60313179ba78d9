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
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(vegetaResult{})); diff != "" {
		t.Errorf("parseVegeta (-want +got):\n%s", diff)
	}
}

// TestRoundsDroppedAndRatios: the round where direct moved 20 % from its
// median is dropped, and × bare proxy is the median of the kept rounds'
// ratios, not the ratio of medians.
func TestRoundsDroppedAndRatios(t *testing.T) {
	s := func(rps float64) sample {
		return sample{wrkResult: wrkResult{rps: rps, requests: int64(rps)}, cpu: time.Second}
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
