// This file reports the extra request kinds (extra.go): the TLS run's
// ratio to plain HTTP, and the tracing run's ratios to the gateway with
// every observing stage off, with their verdicts.

package main

import (
	"fmt"
	"io"
	"slices"
)

// Targets of the tracing kind: the least share of the all-off gateway's
// throughput each all-on gateway keeps.
const (
	minShareOn1   = 0.90
	minShareOn100 = 0.75
)

// extraRow is one target of an extra kind at one connection count, with
// its figures relative to the kind's baseline (gateway http for tls, all
// off for tracing).
type extraRow struct {
	Request  string           `json:"request"`
	Conns    int              `json:"conns"`
	Target   string           `json:"target"`
	Requests int64            `json:"requests"`
	Errors   map[string]int64 `json:"errors,omitempty"`
	Seconds  float64          `json:"seconds"`
	RPS      float64          `json:"req_per_s"`
	P50      float64          `json:"p50_us"`
	P99      float64          `json:"p99_us"`
	CPU      float64          `json:"cpu_per_req_us"`
	Allocs   float64          `json:"allocs_per_req"`
	Bytes    float64          `json:"bytes_per_req"`
	Baseline string           `json:"baseline"`
	// Ratio is RPS over the baseline's; CPURatio and AddedCPU compare CPU
	// per request with the baseline's.
	Ratio    float64 `json:"ratio_to_baseline"`
	CPURatio float64 `json:"cpu_ratio_to_baseline"`
	AddedCPU float64 `json:"cpu_over_baseline_us"`
	// Connections counts the connections the target's server accepted in
	// the measured period (tls): 0 means every request went over a
	// connection (and TLS session) opened during the warm-up.
	Connections *int64 `json:"connections_opened,omitempty"`
	// SpansPerReq is the spans the exporter received per request in the
	// measured period (tracing, with an exporter; the batch span processor
	// is flushed at both ends of the period). A server and a client span
	// per sampled call make 2 at 100%; less means spans were dropped.
	SpansPerReq *float64 `json:"spans_exported_per_req,omitempty"`
}

// extraVerdict compares a target's throughput with its kind's baseline;
// Min and Pass are nil where no target is set (tls).
type extraVerdict struct {
	Request  string   `json:"request"`
	Conns    int      `json:"conns"`
	Target   string   `json:"target"`
	Baseline string   `json:"baseline"`
	RPS      float64  `json:"req_per_s"`
	BaseRPS  float64  `json:"baseline_req_per_s"`
	Ratio    float64  `json:"ratio"`
	CPURatio float64  `json:"cpu_ratio"`
	Min      *float64 `json:"min_ratio,omitempty"`
	Pass     *bool    `json:"pass,omitempty"`
}

// extraTargets are an extra kind's targets in report order, the first
// being the baseline, and the least share of the baseline's throughput
// each other target must keep (0: none set).
var extraTargets = map[string][]struct {
	name string
	min  float64
}{
	kindTLS:     {{targetHTTP, 0}, {targetHTTPS, 0}},
	kindTracing: {{targetAllOff, 0}, {targetOn1, minShareOn1}, {targetOn100, minShareOn100}},
}

// isExtraKind reports whether kind is reported by this file.
func isExtraKind(kind string) bool { _, ok := extraTargets[kind]; return ok }

// buildExtra derives the extra kinds' rows and verdicts from the samples;
// verdicts are given at verdictConnsOf(conns) connections.
func buildExtra(kinds []string, conns []int, samples map[cell]*sample) (tlsRows, tracingRows []extraRow, verdicts []extraVerdict) {
	vn := verdictConnsOf(conns)
	for _, kind := range kinds {
		ts, ok := extraTargets[kind]
		if !ok {
			continue
		}
		for _, n := range conns {
			base := samples[cell{kind, n, ts[0].name}]
			if base == nil {
				continue
			}
			b := newRow(kind, n, ts[0].name, base)
			for _, t := range ts {
				s := samples[cell{kind, n, t.name}]
				if s == nil {
					continue
				}
				r := newExtraRow(kind, n, t.name, s, b)
				if kind == kindTLS {
					tlsRows = append(tlsRows, r)
				} else {
					tracingRows = append(tracingRows, r)
				}
				if t.name == ts[0].name || n != vn {
					continue
				}
				v := extraVerdict{Request: kind, Conns: n, Target: t.name, Baseline: b.Target,
					RPS: r.RPS, BaseRPS: b.RPS, Ratio: r.Ratio, CPURatio: r.CPURatio}
				if t.min > 0 {
					m, pass := t.min, r.Ratio >= t.min
					v.Min, v.Pass = &m, &pass
				}
				verdicts = append(verdicts, v)
			}
		}
	}
	return tlsRows, tracingRows, verdicts
}

// newExtraRow computes one target's figures against the baseline's row b.
func newExtraRow(kind string, n int, t string, s *sample, b row) extraRow {
	r := newRow(kind, n, t, s)
	x := extraRow{Request: kind, Conns: n, Target: t, Requests: r.Requests, Errors: r.Errors, Seconds: r.Seconds,
		RPS: r.RPS, P50: r.P50, P99: r.P99, CPU: r.CPU, Allocs: r.Allocs, Bytes: r.Bytes, Baseline: b.Target,
		Ratio: pairedRatio(&r, &b), CPURatio: ratio(r.CPU, b.CPU), AddedCPU: r.CPU - b.CPU}
	if s.counted {
		c := s.upstream
		switch kind {
		case kindTLS:
			x.Connections = &c
		case kindTracing:
			if s.requests > 0 {
				per := float64(c) / float64(s.requests)
				x.SpansPerReq = &per
			}
		}
	}
	return x
}

// writeExtraMarkdown prints the extra kinds' tables and verdicts.
func (rep *report) writeExtraMarkdown(w io.Writer) {
	if len(rep.TLS) > 0 {
		fmt.Fprintf(w, "\nTLS (GET last_operation through the same gateway over plain HTTP and over TLS 1.2+, ECDSA P-256, HTTP/1.1 keep-alive; "+
			"connections opened counts those accepted in the measured period, 0: one handshake per connection, during the warm-up):\n\n")
		fmt.Fprintf(w, "| conns | target | req/s | p50 | p99 | CPU/req | CPU/req over http | × http req/s | connections opened | allocs/req |\n")
		fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range rep.TLS {
			fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %s | %+.1f µs | %.2f | %s | %.0f |\n",
				r.Conns, r.Target, r.RPS, fmtUS(r.P50), fmtUS(r.P99), fmtCPU(r.CPU), r.AddedCPU, r.Ratio,
				fmtOptCount(r.Connections), r.Allocs)
		}
	}
	if len(rep.Tracing) > 0 {
		fmt.Fprintf(w, "\nTracing (GET last_operation; all off: no trace, metrics or audit stage and no transport wrapper; all on: "+
			"tracing with a batch span processor and an exporter that counts and discards, metrics, audit log to a file with fsync interval; "+
			"the access log is on everywhere):\n\n")
		fmt.Fprintf(w, "| conns | target | req/s | p50 | p99 | CPU/req | CPU/req over all off | × all off req/s | spans exported/req | allocs/req |\n")
		fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
		for _, r := range rep.Tracing {
			spans := "–"
			if r.SpansPerReq != nil {
				spans = fmt.Sprintf("%.3f", *r.SpansPerReq)
			}
			fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %s | %+.1f µs | %.2f | %s | %.0f |\n",
				r.Conns, r.Target, r.RPS, fmtUS(r.P50), fmtUS(r.P99), fmtCPU(r.CPU), r.AddedCPU, r.Ratio, spans, r.Allocs)
		}
	}
	if len(rep.ExtraVerdicts) > 0 {
		fmt.Fprintln(w)
	}
	for _, v := range rep.ExtraVerdicts {
		if v.Pass == nil {
			fmt.Fprintf(w, "Verdict (%s): at %d connections %s keeps %.1f%% of %s's throughput (%.0f vs %.0f req/s) at %.2f× its CPU per request (no target set)\n",
				v.Request, v.Conns, v.Target, v.Ratio*100, v.Baseline, v.RPS, v.BaseRPS, v.CPURatio)
			continue
		}
		fmt.Fprintf(w, "Verdict (%s): at %d connections %s keeps ≥ %.0f%% of %s's throughput: %s (%.0f vs %.0f req/s, %.1f%%; CPU/req %.2f×)\n",
			v.Request, v.Conns, v.Target, *v.Min*100, v.Baseline, passFail(*v.Pass), v.RPS, v.BaseRPS, v.Ratio*100, v.CPURatio)
	}
}

func fmtOptCount(v *int64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%d", *v)
}

// allRows lists every row's kind, connection count, target and errors,
// the extra kinds' included, for the list of errors.
func (rep *report) allRows() []row {
	rows := slices.Clone(rep.Rows)
	for _, x := range slices.Concat(rep.TLS, rep.Tracing) {
		rows = append(rows, row{Request: x.Request, Conns: x.Conns, Target: x.Target, Errors: x.Errors})
	}
	for _, x := range rep.Provision {
		rows = append(rows, row{Request: kindProvision, Conns: x.Conns, Target: x.Target, Errors: x.Errors})
	}
	for _, x := range rep.AuthFlood {
		rows = append(rows, row{Request: kindAuthFlood, Conns: x.Conns, Target: x.Target, Errors: x.Errors})
	}
	return rows
}
