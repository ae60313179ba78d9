// This file turns samples into the report: a markdown table for
// docs/performance.md, the gateway's chain cost, the stage verdict, and the same as JSON.
// The catalog cache's section is in report_cache.go.

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Stage targets the verdict holds the gateway to.
const (
	// minGatewayShare is the least share of the bare proxy's throughput the
	// gateway keeps at verdictConns connections.
	minGatewayShare = 0.85
	verdictConns    = 64
	// maxChainCPU is the most CPU per request the gateway's chain may add
	// to what the bare proxy costs.
	maxChainCPU = 15 * time.Microsecond
)

// report is everything the benchmark prints; its JSON form is the -json
// output.
type report struct {
	Meta              meta               `json:"meta"`
	Rows              []row              `json:"rows"`
	Chain             []chain            `json:"gateway_chain"`
	Verdicts          []verdict          `json:"verdicts"`
	Cache             []cacheRow         `json:"catalog_cache,omitempty"`
	CacheVerdicts     []cacheVerdict     `json:"catalog_cache_verdicts,omitempty"`
	TLS               []extraRow         `json:"tls,omitempty"`
	Tracing           []extraRow         `json:"tracing,omitempty"`
	ExtraVerdicts     []extraVerdict     `json:"tls_tracing_verdicts,omitempty"`
	Provision         []provisionRow     `json:"provision,omitempty"`
	ProvisionVerdicts []provisionVerdict `json:"provision_verdicts,omitempty"`
	AuthFlood         []authFloodRow     `json:"auth_flood,omitempty"`
	AuthFloodVerdicts []authFloodVerdict `json:"auth_flood_verdicts,omitempty"`
	PollShield        []pollShieldRow    `json:"poll_shield,omitempty"`
	Protect           *protectReport     `json:"protect,omitempty"`
	Notes             []string           `json:"notes,omitempty"`
}

// meta describes the run.
type meta struct {
	GoVersion  string   `json:"go_version"`
	GOMAXPROCS int      `json:"gomaxprocs"`
	NumCPU     int      `json:"num_cpu"`
	GOGC       int      `json:"gogc"`
	HeapFloor  string   `json:"heap_floor,omitempty"`
	Duration   string   `json:"duration"`
	Warmup     string   `json:"warmup"`
	Rounds     int      `json:"rounds"`
	Nginx      string   `json:"nginx,omitempty"`
	Targets    []string `json:"targets"`
	// Catalogs are the cache kinds' catalogs, as check found them.
	Catalogs []catalogInfo `json:"catalogs,omitempty"`
	// PollOps and PollInterval are the poll-shield kind's, when it ran.
	PollOps      int    `json:"poll_ops,omitempty"`
	PollInterval string `json:"poll_interval,omitempty"`
	PollDuration string `json:"poll_duration,omitempty"`
}

// row is one target at one request kind and connection count. Per-request
// CPU is in microseconds (zero when no request succeeded); it includes the
// in-process load generator and broker, which AddedCPU (CPU minus direct's)
// leaves out.
type row struct {
	Request  string           `json:"request"`
	Conns    int              `json:"conns"`
	Target   string           `json:"target"`
	Requests int64            `json:"requests"`
	Errors   map[string]int64 `json:"errors,omitempty"`
	Seconds  float64          `json:"seconds"`
	RPS      float64          `json:"req_per_s"`
	// RoundRPS is the throughput of each round, in order (see pairedRatio).
	RoundRPS    []float64 `json:"round_req_per_s,omitempty"`
	P50         float64   `json:"p50_us"`
	P99         float64   `json:"p99_us"`
	CPU         float64   `json:"cpu_per_req_us"`
	AddedCPU    *float64  `json:"added_cpu_per_req_us,omitempty"`
	Allocs      float64   `json:"allocs_per_req"`
	Bytes       float64   `json:"bytes_per_req"`
	Reads       float64   `json:"read_syscalls_per_req"`
	Writes      float64   `json:"write_syscalls_per_req"`
	RatioDirect float64   `json:"ratio_to_direct"`
	RatioBare   *float64  `json:"ratio_to_bare,omitempty"`
	// BrokerCatalogRequests counts the catalog requests that reached the
	// broker behind the target in the measured period, where counted.
	BrokerCatalogRequests *int64 `json:"broker_catalog_requests,omitempty"`
}

// chain is the CPU per request the gateway adds over the bare proxy.
type chain struct {
	Request string  `json:"request"`
	Conns   int     `json:"conns"`
	CPU     float64 `json:"cpu_per_req_us"`
	Pass    bool    `json:"pass"`
}

// verdict is the stage target for one request kind.
type verdict struct {
	Request    string  `json:"request"`
	Conns      int     `json:"conns"`
	GatewayRPS float64 `json:"gateway_req_per_s"`
	BareRPS    float64 `json:"bare_req_per_s"`
	Ratio      float64 `json:"ratio"`
	Pass       bool    `json:"pass"`
}

// cell identifies one measurement.
type cell struct {
	kind   string
	conns  int
	target string
}

// buildReport derives rows, chain costs and verdicts from the samples.
func buildReport(m meta, kinds []string, conns []int, samples map[cell]*sample) *report {
	rep := &report{Meta: m}
	for _, kind := range kinds {
		if isExtraKind(kind) || kind == kindProvision || kind == kindAuthFlood || kind == kindPollShield {
			continue // report_extra.go, report_provision.go, report_authflood.go, report_pollshield.go
		}
		for _, n := range conns {
			rows := map[string]*row{}
			for _, t := range m.Targets {
				s := samples[cell{kind, n, t}]
				if s == nil {
					continue
				}
				r := newRow(kind, n, t, s)
				rows[t] = &r
			}
			relate(rows)
			for _, t := range m.Targets {
				if r := rows[t]; r != nil {
					rep.Rows = append(rep.Rows, *r)
				}
			}
			if g, b := rows[targetGateway], rows[targetBare]; g != nil && b != nil && g.AddedCPU != nil && b.AddedCPU != nil {
				c := *g.AddedCPU - *b.AddedCPU
				rep.Chain = append(rep.Chain, chain{Request: kind, Conns: n, CPU: c, Pass: c < us(maxChainCPU)})
			}
		}
		if v, ok := verdictFor(kind, conns, rep.Rows); ok {
			rep.Verdicts = append(rep.Verdicts, v)
		}
	}
	rep.Cache, rep.CacheVerdicts = buildCache(m.Catalogs, kinds, conns, rep.Rows)
	rep.TLS, rep.Tracing, rep.ExtraVerdicts = buildExtra(kinds, conns, samples)
	rep.Provision, rep.ProvisionVerdicts = buildProvision(kinds, conns, samples)
	rep.AuthFlood, rep.AuthFloodVerdicts = buildAuthFlood(kinds, conns, samples)
	return rep
}

// newRow computes one target's figures.
func newRow(kind string, n int, t string, s *sample) row {
	r := row{Request: kind, Conns: n, Target: t, Requests: s.requests, Errors: s.errors,
		Seconds: s.elapsed.Seconds(), RoundRPS: s.rounds, P50: us(s.hist.quantile(0.50)), P99: us(s.hist.quantile(0.99))}
	if s.elapsed > 0 {
		r.RPS = float64(s.requests) / s.elapsed.Seconds()
	}
	if s.requests > 0 {
		n := float64(s.requests)
		r.CPU = us(s.cpu) / n
		r.Allocs, r.Bytes = float64(s.allocs)/n, float64(s.bytes)/n
		r.Reads, r.Writes = float64(s.io.reads)/n, float64(s.io.writes)/n
	}
	if s.counted {
		u := s.upstream
		r.BrokerCatalogRequests = &u
	}
	return r
}

// relate fills the columns that compare a row with direct and bare proxy
// rows of the same cell.
func relate(rows map[string]*row) {
	d, b := rows[targetDirect], rows[targetBare]
	for name, r := range rows {
		if d == nil {
			break
		}
		r.RatioDirect = pairedRatio(r, d)
		if name != targetDirect && r.Requests > 0 && d.Requests > 0 {
			added := r.CPU - d.CPU
			r.AddedCPU = &added
		}
		if name == targetGateway && b != nil {
			x := pairedRatio(r, b)
			r.RatioBare = &x
		}
	}
}

// verdictConnsOf returns the connection count verdicts are given at:
// verdictConns, or the highest count run.
func verdictConnsOf(conns []int) int {
	n := conns[0]
	for _, c := range conns {
		if c == verdictConns || (n != verdictConns && c > n) {
			n = c
		}
	}
	return n
}

// verdictFor holds the gateway to minGatewayShare of the bare proxy's
// throughput at verdictConnsOf(conns) connections.
func verdictFor(kind string, conns []int, rows []row) (verdict, bool) {
	n := verdictConnsOf(conns)
	v := verdict{Request: kind, Conns: n}
	var g, b *row
	for i, r := range rows {
		if r.Request != kind || r.Conns != n {
			continue
		}
		switch r.Target {
		case targetGateway:
			g = &rows[i]
		case targetBare:
			b = &rows[i]
		}
	}
	if g == nil || b == nil {
		return v, false
	}
	v.GatewayRPS, v.BareRPS = g.RPS, b.RPS
	v.Ratio = pairedRatio(g, b)
	v.Pass = v.Ratio >= minGatewayShare
	return v, true
}

// writeMarkdown prints the report as markdown.
func (rep *report) writeMarkdown(w io.Writer) {
	m := rep.Meta
	fmt.Fprintf(w, "## Load benchmark\n\n")
	floor := ""
	if m.HeapFloor != "" && m.HeapFloor != "off" {
		floor = " above a heap floor of " + m.HeapFloor
	}
	fmt.Fprintf(w, "%s, GOMAXPROCS=%d (%d CPUs), GOGC=%d%s for every target; %s per run after %s warm-up, %d round(s); loopback; ",
		m.GoVersion, m.GOMAXPROCS, m.NumCPU, m.GOGC, floor, m.Duration, m.Warmup, m.Rounds)
	fmt.Fprintf(w, "load generator and sample broker in-process, so CPU/req includes them; added CPU/req is CPU/req minus direct's.\n")
	if m.Rounds >= 3 {
		fmt.Fprintf(w, "Ratios (× columns and verdicts) are the median of the per-round ratios: the targets of a round run back to back, so each round compares them under the same foreign load; req/s, latency and CPU pool all rounds.\n")
	}
	if m.Nginx != "" {
		fmt.Fprintf(w, "nginx %s: its master and workers' CPU is added to this process's.\n", m.Nginx)
	}
	if len(rep.Rows) > 0 {
		fmt.Fprintf(w, "\n| request | conns | target | req/s | p50 | p99 | CPU/req | added CPU/req | × direct | × bare proxy | allocs/req |\n")
		fmt.Fprintf(w, "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	}
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "| %s | %d | %s | %.0f | %s | %s | %s | %s | %.2f | %s | %.0f |\n",
			r.Request, r.Conns, r.Target, r.RPS, fmtUS(r.P50), fmtUS(r.P99), fmtCPU(r.CPU),
			fmtOptCPU(r.AddedCPU), r.RatioDirect, fmtOptRatio(r.RatioBare), r.Allocs)
	}
	if len(rep.Chain) > 0 {
		fmt.Fprintf(w, "\nGateway chain: CPU per request the gateway adds over the bare proxy (target < %s):\n\n", maxChainCPU)
		fmt.Fprintf(w, "| request | conns | gateway − bare proxy CPU/req | < %s |\n| --- | ---: | ---: | --- |\n", maxChainCPU)
		for _, c := range rep.Chain {
			fmt.Fprintf(w, "| %s | %d | %s | %s |\n", c.Request, c.Conns, fmtCPU(c.CPU), passFail(c.Pass))
		}
	}
	if len(rep.Rows) > 0 {
		fmt.Fprintln(w)
	}
	for _, v := range rep.Verdicts {
		fmt.Fprintf(w, "Verdict (%s): at %d connections on pass-through GETs the gateway keeps ≥ %.0f%% of the bare reverse proxy's throughput: %s (gateway %.0f req/s, bare proxy %.0f req/s, %.1f%%)\n",
			v.Request, v.Conns, minGatewayShare*100, passFail(v.Pass), v.GatewayRPS, v.BareRPS, v.Ratio*100)
	}
	rep.writeCacheMarkdown(w)
	rep.writeExtraMarkdown(w)
	rep.writeProvisionMarkdown(w)
	rep.writeAuthFloodMarkdown(w)
	rep.writePollShieldMarkdown(w)
	rep.writeProtectMarkdown(w)
	errs := false
	for _, r := range rep.allRows() {
		if len(r.Errors) > 0 {
			if !errs {
				fmt.Fprintf(w, "\nUnexpected answers (other than 200; 201 for provision) and transport errors (not counted in req/s):\n\n")
				errs = true
			}
			fmt.Fprintf(w, "- %s, %d conns, %s: %s\n", r.Request, r.Conns, r.Target, strings.Join(sortedErrors(r.Errors), "; "))
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "\nNote: %s\n", n)
	}
}

// writeJSON prints the report as indented JSON.
func (rep *report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// us returns d in microseconds.
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// pairedRatio is a's throughput over b's, two targets of one cell. With
// three or more rounds it is the median of the per-round ratios: the
// targets of a round run back to back, so each round's ratio compares them
// under the same load from the rest of a shared machine, and the median
// drops the rounds a burst of foreign load hit one target of. With fewer
// rounds it is the ratio of the pooled throughputs.
func pairedRatio(a, b *row) float64 {
	if len(a.RoundRPS) < 3 || len(a.RoundRPS) != len(b.RoundRPS) {
		return ratio(a.RPS, b.RPS)
	}
	rs := make([]float64, len(a.RoundRPS))
	for i := range rs {
		rs[i] = ratio(a.RoundRPS[i], b.RoundRPS[i])
	}
	return median(rs)
}

// median returns the median of xs (which it sorts); 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	m := len(xs) / 2
	if len(xs)%2 == 1 {
		return xs[m]
	}
	return (xs[m-1] + xs[m]) / 2
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// fmtUS formats a latency given in microseconds.
func fmtUS(v float64) string {
	switch {
	case v >= 10000:
		return fmt.Sprintf("%.1f ms", v/1000)
	case v >= 1000:
		return fmt.Sprintf("%.2f ms", v/1000)
	case v >= 100:
		return fmt.Sprintf("%.0f µs", v)
	}
	return fmt.Sprintf("%.1f µs", v)
}

// fmtCPU formats a CPU time per request given in microseconds.
func fmtCPU(v float64) string { return fmt.Sprintf("%.1f µs", v) }

func fmtOptCPU(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%+.1f µs", *v)
}

func fmtOptRatio(v *float64) string {
	if v == nil {
		return "–"
	}
	return fmt.Sprintf("%.2f", *v)
}

func passFail(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}
