// This file reports the poll-shield request kind (pollshield.go): per
// pollers count and target, the polls answered, the broker's
// last_operation calls per second and their ratio to direct's, and the
// latency each gateway adds at p99.

package main

import (
	"fmt"
	"io"
)

// pollShieldRow is one target of the poll-shield kind at one pollers
// count. The ratios and the added p99 are medians of the per-round
// figures (each round runs every target back to back).
type pollShieldRow struct {
	Pollers        int              `json:"pollers_per_operation"`
	Target         string           `json:"target"`
	PollsPerS      float64          `json:"polls_per_s"`
	BrokerPerS     float64          `json:"broker_calls_per_s"`
	CallsToDirect  float64          `json:"broker_calls_to_direct"`
	P50            float64          `json:"p50_us"`
	P99            float64          `json:"p99_us"`
	P50Added       *float64         `json:"p50_added_us,omitempty"`
	P99Added       *float64         `json:"p99_added_us,omitempty"`
	Errors         map[string]int64 `json:"errors,omitempty"`
	roundCalls     []float64
	roundP50       []float64
	roundP99       []float64
	pooledDuration float64
}

// buildPollShield pools each cell's rounds and relates every target to
// direct, round by round.
func buildPollShield(pollers []int, samples map[pollCell][]pollSample) []pollShieldRow {
	var rows []pollShieldRow
	for _, p := range pollers {
		byName := map[string]*pollShieldRow{}
		for _, t := range pollShieldTargets {
			ss := samples[pollCell{p, t}]
			if len(ss) == 0 {
				continue
			}
			r := &pollShieldRow{Pollers: p, Target: t, Errors: map[string]int64{}}
			var h histogram
			var polls, calls int64
			for _, s := range ss {
				polls += s.polls
				calls += s.brokerCalls
				r.pooledDuration += s.elapsed.Seconds()
				h.merge(&s.hist)
				for k, v := range s.errors {
					r.Errors[k] += v
				}
				r.roundCalls = append(r.roundCalls, float64(s.brokerCalls)/s.elapsed.Seconds())
				r.roundP50 = append(r.roundP50, us(s.hist.quantile(0.50)))
				r.roundP99 = append(r.roundP99, us(s.hist.quantile(0.99)))
			}
			if len(r.Errors) == 0 {
				r.Errors = nil
			}
			r.PollsPerS, r.BrokerPerS = float64(polls)/r.pooledDuration, float64(calls)/r.pooledDuration
			r.P50, r.P99 = us(h.quantile(0.5)), us(h.quantile(0.99))
			byName[t] = r
		}
		d := byName[targetDirect]
		for _, t := range pollShieldTargets {
			r := byName[t]
			if r == nil {
				continue
			}
			if d != nil && len(d.roundCalls) == len(r.roundCalls) {
				callRatios := make([]float64, len(r.roundCalls))
				added50, added99 := make([]float64, len(r.roundCalls)), make([]float64, len(r.roundCalls))
				for i := range r.roundCalls {
					callRatios[i] = ratio(r.roundCalls[i], d.roundCalls[i])
					added50[i] = r.roundP50[i] - d.roundP50[i]
					added99[i] = r.roundP99[i] - d.roundP99[i]
				}
				r.CallsToDirect = median(callRatios)
				if t != targetDirect {
					a50, a99 := median(added50), median(added99)
					r.P50Added, r.P99Added = &a50, &a99
				}
			}
			rows = append(rows, *r)
		}
	}
	return rows
}

// fmtAdded formats a signed latency difference in microseconds; – for
// none.
func fmtAdded(v *float64) string {
	switch {
	case v == nil:
		return "–"
	case *v < 0:
		return "−" + fmtUS(-*v)
	}
	return "+" + fmtUS(*v)
}

// writePollShieldMarkdown prints the poll-shield kind's table.
func (rep *report) writePollShieldMarkdown(w io.Writer) {
	if len(rep.PollShield) == 0 {
		return
	}
	fmt.Fprintf(w, "\nPoll shielding (GET last_operation of %d async provisions in progress, each polled every %s by each of N pollers at its own phase, "+
		"open loop, %s measured per run after as long a warm-up; latency from each poll's scheduled time; ratios and added latencies are medians of the per-round figures):\n\n",
		rep.Meta.PollOps, rep.Meta.PollInterval, rep.Meta.PollDuration)
	fmt.Fprintf(w, "| pollers per operation | target | polls/s | broker calls/s | broker calls × direct | p50 | p99 | p50 added | p99 added |\n")
	fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.PollShield {
		fmt.Fprintf(w, "| %d | %s | %.0f | %.0f | %.3f | %s | %s | %s | %s |\n",
			r.Pollers, r.Target, r.PollsPerS, r.BrokerPerS, r.CallsToDirect, fmtUS(r.P50), fmtUS(r.P99),
			fmtAdded(r.P50Added), fmtAdded(r.P99Added))
	}
	for _, r := range rep.PollShield {
		if len(r.Errors) > 0 {
			fmt.Fprintf(w, "\n- %d pollers, %s: %v", r.Pollers, r.Target, sortedErrors(r.Errors))
		}
	}
	fmt.Fprintln(w)
}
