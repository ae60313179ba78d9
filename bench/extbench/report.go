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
	rounds      []map[string]sample       // by target key
	single      []map[string]sample       // rounds at one connection
	open        []map[string]vegetaResult // open-loop rounds
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
	rs := r.roundRatios(key, ref, kept, rps)
	if len(rs) == 0 {
		return 0, false
	}
	return median(rs), true
}

// rps and cpuPerRequest are a sample's figures for roundRatios: its
// requests/s, and its CPU time per request (none without requests).
func rps(s sample) (float64, bool) { return s.rps, true }

func cpuPerRequest(s sample) (float64, bool) {
	return float64(s.cpu) / float64(s.requests), s.requests > 0
}

// roundRatios is f of key's sample over f of ref's in each kept round
// where both ran and f gives both a figure, ref's above zero.
func (r *report) roundRatios(key, ref string, kept []int, f func(sample) (float64, bool)) []float64 {
	var rs []float64
	for _, i := range kept {
		a, okA := r.rounds[i][key]
		b, okB := r.rounds[i][ref]
		if !okA || !okB {
			continue
		}
		fa, okA := f(a)
		fb, okB := f(b)
		if okA && okB && fb > 0 {
			rs = append(rs, fa/fb)
		}
	}
	return rs
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
	fmt.Fprintln(w, head+" CPU µs/req (its own process) | of it kernel | context switches/req | p50 at 1 conn | added p50 at 1 conn |")
	fmt.Fprintln(w, "| --- | ---: |"+strings.Repeat(" ---: |", len(refs))+" ---: | ---: | ---: | ---: | ---: |")
	for _, t := range r.targets {
		var rates []float64
		for _, i := range kept {
			if s, ok := r.rounds[i][t.key]; ok {
				rates = append(rates, s.rps)
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
		u, n := r.used(t.key, kept)
		cols = append(cols, perRequest(u.cpu, n), perRequest(u.sys, n), switchesPer(u.switches, n))
		p50, ok := medianDur(r.single, t.key, func(s sample) time.Duration { return s.p50 })
		if !ok {
			cols = append(cols, "–", "–")
		} else {
			cols = append(cols, fmtDur(p50))
			if added, ok := addedDur(r.single, t.key, func(s sample) time.Duration { return s.p50 }); ok {
				cols = append(cols, signed(added))
			} else {
				cols = append(cols, "–")
			}
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	}
	fmt.Fprintln(w)
	if len(r.single) > 0 {
		fmt.Fprintf(w, "At one connection: %d rounds of %s per target; p50 is the median of the rounds' p50s, "+
			"added p50 the median of the rounds' differences from direct.\n\n", len(r.single), o.latencyDuration)
	}
	r.writeRounds(w, kept)
	r.writeOpen(w)
	r.writeTargets(w, kept)
}

// writeOpen writes the open-loop table, or why there is none.
func (r *report) writeOpen(w io.Writer) {
	o := r.opts
	if r.open == nil {
		if r.openSkipped != "" {
			fmt.Fprintf(w, "No open-loop run: %s\n\n", r.openSkipped)
		}
		return
	}
	fmt.Fprintf(w, "Open loop: vegeta (%s) at %d req/s for %s per target and round, keep-alive, %d rounds, "+
		"order rotated; medians over the rounds (added: of the rounds' differences from direct); CPU µs/req is the "+
		"target process's CPU time over all its rounds divided by the requests vegeta sent it (of it kernel: its system "+
		"time; context switches: its threads', per request).\n\n",
		strings.TrimPrefix(vegetaModule, "github.com/tsenart/"), o.rate, o.openDuration, len(r.open))
	fmt.Fprintln(w, "| target | sent req/s | success (lowest round) | p50 | p99 | added p50 | added p99 | CPU µs/req (its own process) | of it kernel | context switches/req |")
	fmt.Fprintln(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	p50 := func(v vegetaResult) time.Duration { return v.p50 }
	p99 := func(v vegetaResult) time.Duration { return v.p99 }
	for _, t := range r.targets {
		var rates []float64
		success := 1.0
		var u used
		var n int64
		for _, round := range r.open {
			if v, ok := round[t.key]; ok {
				rates = append(rates, v.rate)
				success = min(success, v.success)
				u = u.add(v.used)
				n += v.requests
			}
		}
		if len(rates) == 0 {
			continue
		}
		m50, _ := medianDur(r.open, t.key, p50)
		m99, _ := medianDur(r.open, t.key, p99)
		added50, added99 := "–", "–"
		if d, ok := addedDur(r.open, t.key, p50); ok {
			added50 = signed(d)
		}
		if d, ok := addedDur(r.open, t.key, p99); ok {
			added99 = signed(d)
		}
		fmt.Fprintf(w, "| %s | %.0f | %.2f %% | %s | %s | %s | %s | %s | %s | %s |\n", t.name, median(rates), success*100,
			fmtDur(m50), fmtDur(m99), added50, added99, perRequest(u.cpu, n), perRequest(u.sys, n), switchesPer(u.switches, n))
	}
	fmt.Fprintln(w)
}

// used sums what key's process used and its requests over the kept
// rounds.
func (r *report) used(key string, kept []int) (used, int64) {
	var u used
	var n int64
	for _, i := range kept {
		if s, ok := r.rounds[i][key]; ok {
			u = u.add(s.used)
			n += s.requests
		}
	}
	return u, n
}

// add is u and v together.
func (u used) add(v used) used {
	return used{cpu: u.cpu + v.cpu, sys: u.sys + v.sys, switches: u.switches + v.switches}
}

// medianDur is the median over rounds of f of key's result; false when
// key never ran.
func medianDur[T any](rounds []map[string]T, key string, f func(T) time.Duration) (time.Duration, bool) {
	var xs []float64
	for _, round := range rounds {
		if v, ok := round[key]; ok {
			xs = append(xs, float64(f(v)))
		}
	}
	return time.Duration(median(xs)), len(xs) > 0
}

// addedDur is the median over rounds of f of key's result minus f of
// direct's in the same round; false for direct itself or without both.
func addedDur[T any](rounds []map[string]T, key string, f func(T) time.Duration) (time.Duration, bool) {
	xs := addedRounds(rounds, key, f)
	return time.Duration(median(xs)), len(xs) > 0
}

// addedRounds is f of key's result minus f of direct's in each round where
// both ran; none for direct itself.
func addedRounds[T any](rounds []map[string]T, key string, f func(T) time.Duration) []float64 {
	if key == keyDirect {
		return nil
	}
	var xs []float64
	for _, round := range rounds {
		v, ok := round[key]
		d, okD := round[keyDirect]
		if ok && okD {
			xs = append(xs, float64(f(v)-f(d)))
		}
	}
	return xs
}

// perRequest is cpu/n in µs, or "–".
func perRequest(cpu time.Duration, n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", float64(cpu.Microseconds())/float64(n))
}

// switchesPer is switches/n with two decimals, or "–".
func switchesPer(switches, n int64) string {
	if n == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", float64(switches)/float64(n))
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

// writeTargets checks the figures against the targets of issue #18, each
// where this run measured what it needs.
func (r *report) writeTargets(w io.Writer, kept []int) {
	// A check's rounds are its figure in each round, which say how near
	// the target the run's noise takes it.
	type check struct {
		what, measured, wanted string
		met                    bool
		rounds                 []float64
		format                 func(float64) string
		suffix                 string // after the rounds' span
		meets                  func(float64) bool
	}
	var cs []check
	times := func(v float64) string { return fmt.Sprintf("%.2f×", v) }
	ms := func(v float64) string { return signed(time.Duration(v)) }
	atLeast := func(want float64) func(float64) bool { return func(v float64) bool { return v >= want } }
	atMost := func(want float64) func(float64) bool { return func(v float64) bool { return v <= want } }
	ratio := func(what, key, ref string, want float64) {
		if v, ok := r.ratio(key, ref, kept); ok {
			cs = append(cs, check{what, times(v), fmt.Sprintf("≥ %.2f×", want), v >= want,
				r.roundRatios(key, ref, kept, rps), times, "", atLeast(want)})
		}
	}
	ratio("gateway (default configuration) × bare proxy", keyGateway, keyBare, 1.3)
	ratio("gateway (default configuration) × nginx", keyGateway, keyNginx, 0.5)
	ratio("gateway on transport: standard × bare proxy (the default chain on http.Transport)", keyStandard, keyBare, 0.95)
	gu, gn := r.used(keyGateway, kept)
	nu, nn := r.used(keyNginx, kept)
	gc, nc := gu.cpu, nu.cpu
	if gn > 0 && nn > 0 && nc > 0 {
		v := (float64(gc) / float64(gn)) / (float64(nc) / float64(nn))
		cs = append(cs, check{"gateway CPU per request ÷ nginx's", times(v), "≤ 2.50×", v <= 2.5,
			r.roundRatios(keyGateway, keyNginx, kept, cpuPerRequest), times, "", atMost(2.5)})
	}
	p50 := func(s sample) time.Duration { return s.p50 }
	g, okG := addedDur(r.single, keyGateway, p50)
	n, okN := addedDur(r.single, keyNginx, p50)
	if okG && okN {
		// Each round against twice nginx's added p50 in that round.
		var over []float64
		for _, round := range r.single {
			gw, okG := round[keyGateway]
			ng, okN := round[keyNginx]
			d, okD := round[keyDirect]
			if okG && okN && okD {
				over = append(over, float64((gw.p50-d.p50)-2*(ng.p50-d.p50)))
			}
		}
		cs = append(cs, check{"gateway's added p50 at 1 connection", signed(g), "≤ 2 × nginx's (" + signed(2*n) + ")", g <= 2*n,
			over, ms, " against 2 × nginx's", atMost(0)})
	}
	p99 := func(v vegetaResult) time.Duration { return v.p99 }
	if d, ok := addedDur(r.open, keyGateway, p99); ok {
		cs = append(cs, check{fmt.Sprintf("gateway's added p99 at %d req/s, open loop", r.opts.rate), signed(d), "≤ +0.400 ms", d <= 400*time.Microsecond,
			addedRounds(r.open, keyGateway, p99), ms, "", atMost(float64(400 * time.Microsecond))})
	}
	if len(cs) == 0 {
		return
	}
	fmt.Fprintln(w, "Against the targets of #18, in this run (each round's figure: its lowest and highest, and in how many rounds it met the target):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| figure | measured | target | met | rounds | met in rounds |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- | ---: | ---: |")
	for _, c := range cs {
		met := "no"
		if c.met {
			met = "yes"
		}
		span, metIn := "–", "–"
		if len(c.rounds) > 0 {
			span = c.format(slices.Min(c.rounds)) + " to " + c.format(slices.Max(c.rounds)) + c.suffix
			k := 0
			for _, v := range c.rounds {
				if c.meets(v) {
					k++
				}
			}
			metIn = fmt.Sprintf("%d of %d", k, len(c.rounds))
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", c.what, c.measured, c.wanted, met, span, metIn)
	}
	fmt.Fprintln(w)
}
