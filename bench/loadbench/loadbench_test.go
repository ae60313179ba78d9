// Quick checks that the benchmark works: every in-process target answers
// 200 under a short load, and the report prints. Nothing here asserts on
// performance.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestInProcessTargetsAnswerAndReportPrints(t *testing.T) {
	e, err := newEnv()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.close)
	kinds := []string{kindCatalog, kindLastOperation}
	if err := e.check(kinds); err != nil {
		t.Fatal(err)
	}
	const conns = 2
	m := meta{GOGC: 200, Duration: "150ms", Warmup: "20ms", Rounds: 1}
	samples := map[cell]*sample{}
	for _, tg := range e.targets {
		m.Targets = append(m.Targets, tg.name)
		for _, kind := range kinds {
			path, err := e.requestPath(kind)
			if err != nil {
				t.Fatal(err)
			}
			s, err := load(context.Background(), spec{url: tg.url(path), header: tg.header, conns: conns,
				warmup: 20 * time.Millisecond, measure: 150 * time.Millisecond})
			if err != nil {
				t.Fatalf("%s %s: %v", tg.name, kind, err)
			}
			if len(s.errors) > 0 || s.requests == 0 || s.cpu <= 0 {
				t.Errorf("%s %s: %d requests, cpu %s, errors %v; want only 200s, some requests and CPU time",
					tg.name, kind, s.requests, s.cpu, s.errors)
			}
			samples[cell{kind, conns, tg.name}] = s
		}
	}
	if got, want := strings.Join(m.Targets, ","), "direct,bare proxy,gateway"; got != want {
		t.Fatalf("targets %q, want %q", got, want)
	}

	rep := buildReport(m, kinds, []int{conns}, samples)
	var md bytes.Buffer
	rep.writeMarkdown(&md)
	for _, want := range []string{
		"| request | conns | target | req/s |",
		"| catalog | 2 | gateway |",
		"| last_operation | 2 | bare proxy |",
		"Verdict (catalog): at 2 connections",
		"Verdict (last_operation): at 2 connections",
		"| gateway − bare proxy CPU/req |",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, md.String())
		}
	}
	var js bytes.Buffer
	if err := rep.writeJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report does not decode: %v", err)
	}
	if len(back.Rows) != 6 || len(back.Verdicts) != 2 || len(back.Chain) != 2 {
		t.Errorf("JSON report has %d rows, %d verdicts, %d chain rows; want 6, 2, 2",
			len(back.Rows), len(back.Verdicts), len(back.Chain))
	}
	for _, r := range back.Rows {
		if r.RPS <= 0 {
			t.Errorf("%s %s: rate %v, want > 0", r.Request, r.Target, r.RPS)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	for i := 1; i <= 1000; i++ {
		h.record(time.Duration(i) * time.Microsecond)
	}
	for _, tc := range []struct {
		name string
		q    float64
		want time.Duration
	}{
		{"p50", 0.50, 500 * time.Microsecond},
		{"p99", 0.99, 990 * time.Microsecond},
		{"max", 1, 1000 * time.Microsecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.quantile(tc.q)
			if diff := float64(got-tc.want) / float64(tc.want); diff < -0.005 || diff > 0.005 {
				t.Errorf("quantile(%v) = %s, want %s within 0.5%%", tc.q, got, tc.want)
			}
		})
	}
	var empty histogram
	if got := empty.quantile(0.5); got != 0 {
		t.Errorf("empty histogram: quantile %s, want 0", got)
	}
}

func TestParseFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "defaults"},
		{name: "all flags", args: []string{"-duration", "1s", "-warmup", "0s", "-conns", "2, 8", "-requests", "catalog",
			"-nginx", "off", "-rounds", "2", "-json"}},
		{name: "bad conns", args: []string{"-conns", "1,0,x"}, wantErr: `-conns: "0"`},
		{name: "bad request kind", args: []string{"-requests", "bind"}, wantErr: `-requests: "bind"`},
		{name: "bad nginx mode", args: []string{"-nginx", "on"}, wantErr: `-nginx: "on"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("error %v", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("error %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}
