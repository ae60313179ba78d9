// This file reports the auth-flood request kind (authflood.go): the
// legitimate calls' latency undisturbed and beside each flood of wrong
// passwords, what the floods got back, and the verdict on the p99.

package main

import (
	"fmt"
	"io"
	"slices"
)

// maxFloodP99Ratio is the most the legitimate calls' p99 may grow while 40
// wrong passwords a second arrive from one address, or from 199 that hold
// their connections, over the undisturbed p99 of the same run.
const maxFloodP99Ratio = 2.0

// authFloodRow is one auth-flood target at one connection count.
type authFloodRow struct {
	Conns    int              `json:"conns"`
	Target   string           `json:"target"`
	Requests int64            `json:"requests"`
	Errors   map[string]int64 `json:"errors,omitempty"`
	Seconds  float64          `json:"seconds"`
	RPS      float64          `json:"req_per_s"`
	P50      float64          `json:"p50_us"`
	P99      float64          `json:"p99_us"`
	CPU      float64          `json:"cpu_per_req_us"`
	// P99Ratio is P99 over the undisturbed target's: with three or more
	// rounds the median of the per-round ratios, else the pooled one.
	P99Ratio float64 `json:"p99_to_undisturbed"`
	// Flood is what the flood beside the calls sent and got back; nil for
	// the undisturbed target.
	Flood *floodStats `json:"flood,omitempty"`
	// WrongPerS, RefusedPerS and LimitedPerS are the flood's wrong
	// passwords sent, answered 401 and answered 429 a second.
	WrongPerS   float64 `json:"wrong_passwords_per_s,omitempty"`
	RefusedPerS float64 `json:"answered_401_per_s,omitempty"`
	LimitedPerS float64 `json:"answered_429_per_s,omitempty"`
	// Shed is how many legitimate calls got 429 or 503.
	Shed     int64 `json:"legitimate_429_503"`
	roundP99 []float64
}

// authFloodVerdict holds a flood's p99 ratio to maxFloodP99Ratio at one
// connection count: the single-address flood's, and the spread held
// flood's, which must also shed no legitimate call (Shed 0).
type authFloodVerdict struct {
	Conns   int     `json:"conns"`
	Target  string  `json:"target"`
	P99     float64 `json:"p99_us"`
	BaseP99 float64 `json:"undisturbed_p99_us"`
	Ratio   float64 `json:"ratio"`
	Max     float64 `json:"max_ratio"`
	Shed    int64   `json:"legitimate_429_503"`
	Pass    bool    `json:"pass"`
}

// authFloodTargets are the kind's targets in report order, the baseline
// first.
var authFloodTargets = []string{targetUndisturbed, targetFloodOne, targetFloodMany, targetFloodSpread}

// buildAuthFlood derives the kind's rows and verdicts, one verdict per
// connection count (a latency target holds at every load).
func buildAuthFlood(kinds []string, conns []int, samples map[cell]*sample) ([]authFloodRow, []authFloodVerdict) {
	if !slices.Contains(kinds, kindAuthFlood) {
		return nil, nil
	}
	var rows []authFloodRow
	var verdicts []authFloodVerdict
	for _, n := range conns {
		var base *authFloodRow
		for _, t := range authFloodTargets {
			s := samples[cell{kindAuthFlood, n, t}]
			if s == nil {
				continue
			}
			r := newRow(kindAuthFlood, n, t, s)
			a := authFloodRow{Conns: n, Target: t, Requests: r.Requests, Errors: r.Errors, Seconds: r.Seconds, RPS: r.RPS,
				P50: r.P50, P99: r.P99, CPU: r.CPU, Flood: s.flood, roundP99: s.roundP99,
				Shed: r.Errors["status 429"] + r.Errors["status 503"]}
			if s.flood != nil {
				a.WrongPerS, a.RefusedPerS, a.LimitedPerS = s.flood.sent(), s.flood.perSecond("status 401"), s.flood.perSecond("status 429")
			}
			if base == nil && t == targetUndisturbed {
				base = &a
			}
			if base != nil {
				a.P99Ratio = pairedP99Ratio(&a, base)
			}
			rows = append(rows, a)
			if (t == targetFloodOne || t == targetFloodSpread) && base != nil {
				v := authFloodVerdict{Conns: n, Target: t, P99: a.P99, BaseP99: base.P99, Ratio: a.P99Ratio,
					Max: maxFloodP99Ratio, Shed: a.Shed, Pass: a.P99Ratio <= maxFloodP99Ratio}
				if t == targetFloodSpread {
					v.Pass = v.Pass && a.Shed == 0
				}
				verdicts = append(verdicts, v)
			}
		}
	}
	return rows, verdicts
}

// pairedP99Ratio is a's p99 over b's, as pairedRatio takes throughput
// ratios: the median of the rounds' ratios from three rounds on.
func pairedP99Ratio(a, b *authFloodRow) float64 {
	if len(a.roundP99) < 3 || len(a.roundP99) != len(b.roundP99) {
		return ratio(a.P99, b.P99)
	}
	rs := make([]float64, len(a.roundP99))
	for i := range rs {
		rs[i] = ratio(a.roundP99[i], b.roundP99[i])
	}
	return median(rs)
}

// writeAuthFloodMarkdown prints the kind's table and verdicts.
func (rep *report) writeAuthFloodMarkdown(w io.Writer) {
	if len(rep.AuthFlood) == 0 {
		return
	}
	fmt.Fprintf(w, "\nAuth flood (GET last_operation as a tenant whose credential is a bcrypt hash of cost %d, verified once and then "+
		"cached, from 127.0.0.1; beside it %d wrong passwords/s, each new, from 127.0.0.2, spread over %d addresses, "+
		"or spread over %d addresses that hold their connections up to %s; the auth section at its defaults):\n\n",
		bcryptDefaultCost, floodRate, floodRate, floodSpreadAddrs, floodHold)
	fmt.Fprintf(w, "| conns | target | req/s | p50 | p99 | p99 × undisturbed | legit 429/503 | CPU/req | wrong/s sent | 401/s | 429/s |\n")
	fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.AuthFlood {
		fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %.2f | %d | %s | %s | %s | %s |\n",
			r.Conns, r.Target, r.RPS, fmtUS(r.P50), fmtUS(r.P99), r.P99Ratio, r.Shed, fmtCPU(r.CPU),
			fmtRate(r.Flood, r.WrongPerS), fmtRate(r.Flood, r.RefusedPerS), fmtRate(r.Flood, r.LimitedPerS))
	}
	fmt.Fprintln(w)
	for _, v := range rep.AuthFloodVerdicts {
		if v.Target == targetFloodSpread {
			fmt.Fprintf(w, "Verdict (auth-flood): at %d connections, with %d wrong passwords/s from %d addresses holding their connections "+
				"the legitimate p99 stays ≤ %.0f× the undisturbed p99 and no legitimate call gets 429 or 503: %s (%s against %s, %.2f×; %d shed)\n",
				v.Conns, floodRate, floodSpreadAddrs, v.Max, passFail(v.Pass), fmtUS(v.P99), fmtUS(v.BaseP99), v.Ratio, v.Shed)
			continue
		}
		fmt.Fprintf(w, "Verdict (auth-flood): at %d connections, with %d wrong passwords/s from one address the legitimate p99 stays "+
			"≤ %.0f× the undisturbed p99: %s (%s against %s, %.2f×)\n",
			v.Conns, floodRate, v.Max, passFail(v.Pass), fmtUS(v.P99), fmtUS(v.BaseP99), v.Ratio)
	}
	for _, r := range rep.AuthFlood {
		if r.Flood == nil {
			continue
		}
		var other []string
		for k, n := range r.Flood.Answers {
			if k != "status 401" && k != "status 429" {
				// skipped ticks, transport errors, anything but a refusal
				other = append(other, fmt.Sprintf("%s ×%d", k, n))
			}
		}
		if len(other) > 0 {
			slices.Sort(other)
			fmt.Fprintf(w, "- %d conns, %s: the flood also got %v\n", r.Conns, r.Target, other)
		}
	}
}

// fmtRate formats a flood's per-second figure, "–" without a flood.
func fmtRate(f *floodStats, v float64) string {
	if f == nil {
		return "–"
	}
	return fmt.Sprintf("%.1f", v)
}
