// This file turns the runs into the Markdown report.

package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// dropAbove is how far direct may move from its median in a kept round.
const dropAbove = 0.10

// report is what the runs measured.
type report struct {
	opts        *options
	targets     []*target
	started     time.Time
	rounds      []map[string]sample // by target key
	single      map[string]sample   // at one connection
	open        map[string]vegetaResult
	openSkipped string
}

// kept returns the indexes of the rounds where direct stayed within
// dropAbove of its median (every round without a direct target).
func (r *report) kept() []int {
	var rates []float64
	for _, round := range r.rounds {
		if s, ok := round[keyDirect]; ok {
			rates = append(rates, s.rps)
		}
	}
	var idx []int
	m := median(rates)
	for i, round := range r.rounds {
		s, ok := round[keyDirect]
		if !ok || len(rates) < 2 || math.Abs(s.rps-m) <= dropAbove*m {
			idx = append(idx, i)
		}
	}
	return idx
}

// ratio returns the median over the kept rounds of key's requests/s over
// ref's; false when either is missing.
func (r *report) ratio(key, ref string, kept []int) (float64, bool) {
	var rs []float64
	for _, i := range kept {
		a, okA := r.rounds[i][key]
		b, okB := r.rounds[i][ref]
		if okA && okB && b.rps > 0 {
			rs = append(rs, a.rps/b.rps)
		}
	}
	if len(rs) == 0 {
		return 0, false
	}
	return median(rs), true
}

// write writes the report as Markdown.
func (r *report) write(w io.Writer) {
	o := r.opts
	kept := r.kept()
	fmt.Fprintf(w, "## External benchmark, %s\n\n", r.started.Format("2006-01-02 15:04"))
	fmt.Fprintf(w, "%s; wrk %s; GET last_operation (62 B answer) with keep-alive; closed loop `wrk -t1 -c%d`, "+
		"%d rounds × %s, order rotated per round; kept %d of %d rounds (direct within %.0f %% of its median).\n\n",
		cores(), strings.TrimPrefix(wrkVersion(), "wrk "), o.conns, o.rounds, o.duration, len(kept), len(r.rounds), dropAbove*100)
	refs := []string{keyDirect, keyBare, keyNginx}
	head := "| target | req/s | × direct | × bare proxy | × nginx |"
	if r.has(keyBefore) {
		refs = append(refs, keyBefore)
		head += " × " + o.beforeLabel + " |"
	}
	fmt.Fprintln(w, head+" CPU µs/req (its own process) | p50 at 1 conn | added p50 at 1 conn |")
	fmt.Fprintln(w, "| --- | ---: |"+strings.Repeat(" ---: |", len(refs))+" ---: | ---: | ---: |")
	direct := r.single[keyDirect]
	for _, t := range r.targets {
		var rates []float64
		var cpu time.Duration
		var n int64
		for _, i := range kept {
			if s, ok := r.rounds[i][t.key]; ok {
				rates = append(rates, s.rps)
				cpu += s.cpu
				n += s.requests
			}
		}
		cols := []string{t.name, fmt.Sprintf("%.0f", median(rates))}
		for _, ref := range refs {
			v, ok := r.ratio(t.key, ref, kept)
			if !ok || (t.key == keyDirect && ref != keyDirect) {
				cols = append(cols, "–")
				continue
			}
			cols = append(cols, fmt.Sprintf("%.2f", v))
		}
		cols = append(cols, perRequest(cpu, n))
		if s, ok := r.single[t.key]; ok {
			cols = append(cols, fmtDur(s.p50))
			if _, ok := r.single[keyDirect]; ok && t.key != keyDirect {
				cols = append(cols, signed(s.p50-direct.p50))
			} else {
				cols = append(cols, "–")
			}
		} else {
			cols = append(cols, "–", "–")
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	}
	fmt.Fprintln(w)
	r.writeRounds(w, kept)
	if r.open == nil {
		if r.openSkipped != "" {
			fmt.Fprintf(w, "No open-loop run: %s\n", r.openSkipped)
		}
		return
	}
	fmt.Fprintf(w, "Open loop: vegeta (%s) at %d req/s for %s per target, keep-alive.\n\n",
		strings.TrimPrefix(vegetaModule, "github.com/tsenart/"), o.rate, o.openDuration)
	fmt.Fprintln(w, "| target | sent req/s | success | p50 | p99 | added p50 | added p99 |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
	od, haveDirect := r.open[keyDirect]
	for _, t := range r.targets {
		v, ok := r.open[t.key]
		if !ok {
			continue
		}
		added50, added99 := "–", "–"
		if haveDirect && t.key != keyDirect {
			added50, added99 = signed(v.p50-od.p50), signed(v.p99-od.p99)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f %% | %s | %s | %s | %s |\n", t.name, v.rate, v.success*100,
			fmtDur(v.p50), fmtDur(v.p99), added50, added99)
	}
	fmt.Fprintln(w)
}

// perRequest is cpu/n in µs, or "–".
func perRequest(cpu time.Duration, n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(cpu.Microseconds())/float64(n))
}

// fmtDur prints d in ms with two decimals below a second.
func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.3f ms", float64(d)/float64(time.Millisecond))
}

func signed(d time.Duration) string {
	if d >= 0 {
		return "+" + fmtDur(d)
	}
	return fmtDur(d)
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// has reports whether a target of key ran.
func (r *report) has(key string) bool {
	return slices.ContainsFunc(r.targets, func(t *target) bool { return t.key == key })
}

// writeRounds writes every round's requests/s, so that a reader can take
// other ratios than the table's, or see what the dropped rounds were.
func (r *report) writeRounds(w io.Writer, kept []int) {
	fmt.Fprint(w, "Requests/s per round:\n\n| round | kept |")
	for _, t := range r.targets {
		fmt.Fprintf(w, " %s |", t.key)
	}
	fmt.Fprint(w, "\n| ---: | --- |"+strings.Repeat(" ---: |", len(r.targets))+"\n")
	for i, round := range r.rounds {
		k := "no"
		if slices.Contains(kept, i) {
			k = "yes"
		}
		fmt.Fprintf(w, "| %d | %s |", i+1, k)
		for _, t := range r.targets {
			fmt.Fprintf(w, " %.0f |", round[t.key].rps)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}
