// This file reports the protect request kind (protect.go): the overload
// rounds, the outage behind each gateway, and the verdicts.

package main

import (
	"fmt"
	"io"
	"time"
)

// Targets of the protect kind.
const (
	maxAdmittedP99Ratio = 3.0                    // admitted p99 under overload over the unloaded p99
	maxShedLatency      = time.Millisecond       // a shed call's answer, and a breaker's
	outageNoBreaker     = "gateway, no breaker"  // the outage's gateways
	outageBreaker       = "gateway with breaker" //
)

// protectReport is the protect kind's part of the report.
type protectReport struct {
	Overload []overloadRow `json:"overload"`
	// AdmittedRatio is the median over the rounds of the admitted calls'
	// p99 over the unloaded p99, ShedP99 the median of the rounds' p99 of
	// the shed answers, ShedMax and ShedUnder the slowest of them and the
	// share under 1 ms over every round (microseconds); Others the calls
	// that got neither 200 nor the shedding 503 (or no answer).
	AdmittedRatio float64       `json:"admitted_p99_to_unloaded"`
	ShedP99       float64       `json:"shed_p99_us"`
	ShedMax       float64       `json:"shed_max_us"`
	ShedUnder     float64       `json:"shed_share_under_1ms"`
	Others        int64         `json:"other_outcomes"`
	Outage        []outageRow   `json:"outage"`
	Verdicts      []protectVerd `json:"verdicts"`
	shed          histogram
}

// overloadRow is one overload round.
type overloadRow struct {
	Capacity    float64 `json:"capacity_per_s"`
	UnloadedP99 float64 `json:"unloaded_p99_us"`
	OfferedRate float64 `json:"offered_per_s"`
	Admitted    float64 `json:"admitted_per_s"`
	AdmittedP99 float64 `json:"admitted_p99_us"`
	Shed        float64 `json:"shed_per_s"`
	ShedP99     float64 `json:"shed_p99_us"`
	Ratio       float64 `json:"admitted_p99_to_unloaded"`
	Others      int64   `json:"other_outcomes"`
}

// outageRow is the outage behind one gateway: the calls sent while the
// broker was down.
type outageRow struct {
	Gateway  string  `json:"gateway"`
	Calls    int64   `json:"calls"`
	P50      float64 `json:"p50_us"`
	P99      float64 `json:"p99_us"`
	Mean     float64 `json:"mean_us"`
	Under1ms int64   `json:"answered_under_1ms"`
	TimedOut int64   `json:"waited_for_the_timeout"`
	// FastP50 and FastP99 are the p50 and p99 of the answers the breaker
	// gave (503) in every run, in microseconds (a run has about 150 of
	// them, too few for a p99 of its own); zero without the breaker.
	FastP50 float64 `json:"breaker_answers_p50_us"`
	FastP99 float64 `json:"breaker_answers_p99_us"`
	Others  int64   `json:"other_outcomes"`
	// CostRatio is Mean over the gateway without a breaker's.
	CostRatio float64 `json:"mean_to_no_breaker"`
	// Recovery is how long after the outage the first call sent got 200,
	// in microseconds (the mean of the runs).
	Recovery float64 `json:"recovered_after_us"`
}

// protectVerd is one verdict of the kind.
type protectVerd struct {
	What string `json:"what"`
	Got  string `json:"got"`
	Pass bool   `json:"pass"`
}

func (rep *protectReport) addOverload(r *overloadRound) {
	o, u := r.overload, r.unloaded
	secs := o.elapsed.Seconds()
	row := overloadRow{Capacity: r.capacity, UnloadedP99: us(u.hist(200).quantile(0.99)),
		OfferedRate: float64(o.sent) / secs, Admitted: float64(o.byStatus[200]) / secs,
		AdmittedP99: us(o.hist(200).quantile(0.99)), Shed: float64(o.byStatus[503]) / secs,
		ShedP99: us(o.hist(503).quantile(0.99)), Others: o.others(200, 503) + u.others(200)}
	row.Ratio = ratio(row.AdmittedP99, row.UnloadedP99)
	rep.Overload = append(rep.Overload, row)
	rep.shed.merge(o.hist(503))
	rep.Others += row.Others
}

// newOutageRow sums up the calls the runs rs sent while the broker was
// down, and per run how long after the outage the first 200 came.
func newOutageRow(name string, rs ...*openResult) outageRow {
	row := outageRow{Gateway: name}
	var all, fast histogram
	var sum, recoveries time.Duration
	for _, r := range rs {
		recovered := row.add(r, &all, &fast, &sum)
		if recovered < 0 {
			recovered = r.elapsed - outageBefore - outageLength // none: the rest of the run
		}
		recoveries += recovered
	}
	if row.Calls > 0 {
		row.Mean = us(sum / time.Duration(row.Calls))
	}
	row.P50, row.P99 = us(all.quantile(0.5)), us(all.quantile(0.99))
	row.FastP50, row.FastP99 = us(fast.quantile(0.5)), us(fast.quantile(0.99))
	if len(rs) > 0 {
		row.Recovery = us(recoveries / time.Duration(len(rs)))
	}
	return row
}

// add counts the calls of r sent during the outage into row and the
// histograms; it returns how long after the outage the first 200 came (-1:
// none did).
func (row *outageRow) add(r *openResult, all, fast *histogram, sum *time.Duration) time.Duration {
	recovered := time.Duration(-1)
	for _, c := range r.calls {
		if c.at >= outageBefore+outageLength && c.status == 200 && (recovered < 0 || c.at < recovered) {
			recovered = c.at
		}
		if c.at < outageBefore || c.at >= outageBefore+outageLength {
			continue
		}
		row.Calls++
		all.record(c.took)
		*sum += c.took
		switch {
		case c.took < maxShedLatency:
			row.Under1ms++
		case c.took >= outageTimeout*9/10:
			row.TimedOut++
		}
		switch c.status {
		case 503:
			fast.record(c.took)
		case 200, 504:
		default:
			row.Others++
		}
	}
	row.Others += int64(len(r.errors)) + r.skipped
	if recovered < 0 {
		return -1
	}
	return recovered - outageBefore - outageLength
}

// finish derives the medians, the ratios and the verdicts.
func (rep *protectReport) finish() {
	var rs []float64
	for _, r := range rep.Overload {
		rs = append(rs, r.Ratio)
	}
	rep.AdmittedRatio = median(rs)
	var shed []float64
	for _, r := range rep.Overload {
		shed = append(shed, r.ShedP99)
	}
	rep.ShedP99, rep.ShedMax = median(shed), us(rep.shed.quantile(1))
	if rep.shed.n > 0 {
		var under int64
		for i, c := range rep.shed.counts {
			if bucketMid(i) < float64(maxShedLatency) {
				under += c
			}
		}
		rep.ShedUnder = float64(under) / float64(rep.shed.n)
	}
	rep.Verdicts = append(rep.Verdicts,
		protectVerd{fmt.Sprintf("at %d× capacity the admitted calls' p99 stays ≤ %.0f× the unloaded p99 (median of the rounds)", protectOverload, maxAdmittedP99Ratio),
			fmt.Sprintf("%.2f×", rep.AdmittedRatio), rep.AdmittedRatio > 0 && rep.AdmittedRatio <= maxAdmittedP99Ratio},
		protectVerd{fmt.Sprintf("the excess is shed (503) within %s (p99, median of the rounds)", maxShedLatency),
			fmt.Sprintf("p99 %s, max %s, %.2f%% under 1 ms", fmtUS(rep.ShedP99), fmtUS(rep.ShedMax), 100*rep.ShedUnder),
			rep.shed.n > 0 && rep.ShedP99 < us(maxShedLatency)},
		protectVerd{"no call gets anything but 200 or the shedding 503", fmt.Sprintf("%d others", rep.Others), rep.Others == 0})
	var base *outageRow
	for i := range rep.Outage {
		r := &rep.Outage[i]
		if r.Gateway == outageNoBreaker {
			base = r
		}
	}
	for i := range rep.Outage {
		r := &rep.Outage[i]
		if base != nil {
			r.CostRatio = ratio(r.Mean, base.Mean)
		}
		if r.Gateway != outageBreaker {
			continue
		}
		// The calls sent before the first failures came back, then a
		// probe per open_for, wait for the timeout; the rest are answered
		// at once.
		rounds := int64(max(1, len(rep.Overload)))
		allowed := rounds * (int64(outageRate*outageTimeout/time.Second) + outageFailures + int64(outageLength/outageOpenFor) + 1)
		rep.Verdicts = append(rep.Verdicts,
			protectVerd{fmt.Sprintf("during a %s outage the breaker answers callers within %s (p99 of its answers, all rounds pooled)", outageLength, maxShedLatency),
				fmt.Sprintf("p50 %s, p99 %s; %d of %d calls under 1 ms; mean cost %.4f× the gateway without a breaker's",
					fmtUS(r.FastP50), fmtUS(r.FastP99), r.Under1ms, r.Calls, r.CostRatio),
				r.FastP99 > 0 && r.FastP99 < us(maxShedLatency) && r.Others == 0},
			protectVerd{fmt.Sprintf("only the calls sent before the first failures came back (%d/s × %s) and the probes wait for the timeout (at most %d)",
				outageRate, outageTimeout, allowed),
				fmt.Sprintf("%d", r.TimedOut), r.TimedOut <= allowed})
	}
}

// writeProtectMarkdown prints the kind's tables and verdicts.
func (rep *report) writeProtectMarkdown(w io.Writer) {
	p := rep.Protect
	if p == nil {
		return
	}
	fmt.Fprintf(w, "\nOverload (GET instance open-loop through a gateway with brokers[].max_in_flight %d and queue_timeout 0s, "+
		"in front of a broker taking %s per call; capacity measured closed-loop with %d connections; unloaded at %.2f× it, "+
		"overload at %d×):\n\n", protectCap, protectLatency, protectCap, protectUnloaded, protectOverload)
	fmt.Fprintf(w, "| round | capacity/s | unloaded p99 | offered/s | admitted/s | admitted p99 | × unloaded p99 | shed/s | shed p99 | other |\n")
	fmt.Fprintf(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for i, r := range p.Overload {
		fmt.Fprintf(w, "| %d | %.0f | %s | %.0f | %.0f | %s | %.2f | %.0f | %s | %d |\n", i+1, r.Capacity, fmtUS(r.UnloadedP99),
			r.OfferedRate, r.Admitted, fmtUS(r.AdmittedP99), r.Ratio, r.Shed, fmtUS(r.ShedP99), r.Others)
	}
	fmt.Fprintf(w, "\nOutage (GET instance open-loop at %d/s; the broker holds every call for %s after %s; brokers[].timeout %s; "+
		"breaker {failures: %d, open_for: %s, probes: 1}); the calls sent during the outage:\n\n",
		outageRate, outageLength, outageBefore, outageTimeout, outageFailures, outageOpenFor)
	fmt.Fprintf(w, "| gateway | calls | p50 | p99 | mean | × no breaker | under 1 ms | waited for the timeout | breaker answers p50 / p99 | first 200 after the outage | other |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range p.Outage {
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %.2f | %d | %d | %s | %s | %d |\n", r.Gateway, r.Calls, fmtUS(r.P50), fmtUS(r.P99),
			fmtUS(r.Mean), r.CostRatio, r.Under1ms, r.TimedOut, fmtOptUS(r.FastP50)+" / "+fmtOptUS(r.FastP99), fmtUS(r.Recovery), r.Others)
	}
	fmt.Fprintln(w)
	for _, v := range p.Verdicts {
		fmt.Fprintf(w, "Verdict (protect): %s: %s (%s)\n", v.What, passFail(v.Pass), v.Got)
	}
}

// fmtOptUS formats microseconds, "–" for zero.
func fmtOptUS(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmtUS(v)
}
