package main

import (
	"context"
	"io"
	"testing"
	"time"
)

// TestProtectRunsAndReportPrints runs the protect kind briefly: every call
// of the overload gets 200 or the shedding 503, every call through the
// outage 200, 503 or 504, and the report prints both tables and the
// verdicts. Nothing here asserts on performance.
func TestProtectRunsAndReportPrints(t *testing.T) {
	if testing.Short() {
		t.Skip("about five seconds of load")
	}
	p, err := runProtect(context.Background(), 1, 200*time.Millisecond, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Overload) != 1 || len(p.Outage) != 2 || p.Outage[0].Others != 0 || p.Outage[1].Others != 0 {
		t.Fatalf("overload %+v, outage %+v", p.Overload, p.Outage)
	}
	if o := p.Overload[0]; o.Admitted == 0 || o.Others != 0 {
		t.Errorf("overload round: %+v; want admitted calls and nothing but 200 and 503", o)
	}
	rep := &report{Protect: p}
	_, back := checkReport(t, rep,
		"| round | capacity/s | unloaded p99 |",
		"| gateway, no breaker | ",
		"| gateway with breaker | ",
		"Verdict (protect): at 3× capacity the admitted calls' p99 stays ≤ 3× the unloaded p99",
		"Verdict (protect): during a 1s outage the breaker answers callers within 1ms",
	)
	if back.Protect == nil || len(back.Protect.Verdicts) != 5 {
		t.Fatalf("JSON report: %+v; want the protect section with 5 verdicts", back.Protect)
	}
}

// TestOutageRowCountsTheOutageOnly: the calls sent before and after the
// outage are left out; each is sorted by how long it took.
func TestOutageRowCountsTheOutageOnly(t *testing.T) {
	ms := time.Millisecond
	r := &openResult{elapsed: outageBefore + outageLength + outageBefore, calls: []timedCall{
		{at: outageBefore - ms, took: ms / 10, status: 200},                   // before
		{at: outageBefore, took: outageTimeout, status: 504},                  // opens it
		{at: outageBefore + 300*ms, took: ms / 5, status: 503},                // the breaker's
		{at: outageBefore + 400*ms, took: 2 * ms, status: 503},                // slow
		{at: outageBefore + 500*ms, took: ms / 5, status: 418},                // other
		{at: outageBefore + outageLength + 40*ms, took: ms / 10, status: 200}, // recovered
	}}
	got := newOutageRow(outageBreaker, r)
	if got.Calls != 4 || got.Under1ms != 2 || got.TimedOut != 1 || got.Others != 1 || got.Recovery != 40000 {
		t.Errorf("row %+v; want 4 calls, 2 under 1 ms, 1 timed out, 1 other, recovered after 40 ms", got)
	}
}
