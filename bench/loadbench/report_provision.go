// This file reports the provision request kind (provision.go): provisions
// per second directly and through the gateway with each state store, the
// ratios to direct and of bolt to memory, and a verdict line without a
// fixed target.

package main

import (
	"fmt"
	"io"
)

// provisionRow is one target of the provision kind at one connection
// count. RPS counts 201 answers (provisions) per second.
type provisionRow struct {
	Conns       int              `json:"conns"`
	Target      string           `json:"target"`
	Requests    int64            `json:"provisions"`
	Errors      map[string]int64 `json:"errors,omitempty"`
	Seconds     float64          `json:"seconds"`
	RPS         float64          `json:"provisions_per_s"`
	rounds      []float64        // per-round throughput (pairedRatio)
	P50         float64          `json:"p50_us"`
	P99         float64          `json:"p99_us"`
	CPU         float64          `json:"cpu_per_req_us"`
	Allocs      float64          `json:"allocs_per_req"`
	RatioDirect float64          `json:"ratio_to_direct"`
	// RatioMemory is gateway bolt's throughput over gateway memory's.
	RatioMemory *float64 `json:"ratio_to_gateway_memory,omitempty"`
}

// provisionVerdict reports provisions/s through the gateway with the bolt
// store; no target is set.
type provisionVerdict struct {
	Conns        int     `json:"conns"`
	BoltRPS      float64 `json:"gateway_bolt_provisions_per_s"`
	MemoryRPS    float64 `json:"gateway_memory_provisions_per_s"`
	DirectRPS    float64 `json:"direct_provisions_per_s"`
	BoltToMemory float64 `json:"bolt_to_memory"`
	BoltToDirect float64 `json:"bolt_to_direct"`
	Errors       int64   `json:"errors"`
}

// provisionTargets are the provision kind's targets in report order.
var provisionTargets = []string{targetDirect, targetGatewayMemory, targetGatewayBolt}

// buildProvision derives the provision kind's rows and its verdict, given
// at verdictConnsOf(conns) connections.
func buildProvision(kinds []string, conns []int, samples map[cell]*sample) ([]provisionRow, []provisionVerdict) {
	if !hasProvision(kinds) {
		return nil, nil
	}
	var rows []provisionRow
	var verdicts []provisionVerdict
	vn := verdictConnsOf(conns)
	for _, n := range conns {
		byName := map[string]*provisionRow{}
		var errs int64
		for _, t := range provisionTargets {
			s := samples[cell{kindProvision, n, t}]
			if s == nil {
				continue
			}
			r := newRow(kindProvision, n, t, s)
			byName[t] = &provisionRow{Conns: n, Target: t, Requests: r.Requests, Errors: r.Errors, Seconds: r.Seconds,
				RPS: r.RPS, rounds: r.RoundRPS, P50: r.P50, P99: r.P99, CPU: r.CPU, Allocs: r.Allocs}
			errs += total(s.errors)
		}
		d, m, b := byName[targetDirect], byName[targetGatewayMemory], byName[targetGatewayBolt]
		for _, t := range provisionTargets {
			r := byName[t]
			if r == nil {
				continue
			}
			if d != nil {
				r.RatioDirect = provisionRatio(r, d)
			}
			if t == targetGatewayBolt && m != nil {
				x := provisionRatio(r, m)
				r.RatioMemory = &x
			}
			rows = append(rows, *r)
		}
		if n == vn && d != nil && m != nil && b != nil {
			verdicts = append(verdicts, provisionVerdict{Conns: n, BoltRPS: b.RPS, MemoryRPS: m.RPS, DirectRPS: d.RPS,
				BoltToMemory: provisionRatio(b, m), BoltToDirect: provisionRatio(b, d), Errors: errs})
		}
	}
	return rows, verdicts
}

// writeProvisionMarkdown prints the provision kind's table and verdict.
func (rep *report) writeProvisionMarkdown(w io.Writer) {
	if len(rep.Provision) == 0 {
		return
	}
	fmt.Fprintf(w, "\nProvision (synchronous PUT /v2/service_instances/<new id> on the sample broker's sync plan, 201 expected; "+
		"through the gateway each acquires and releases the instance's operation lock in the state store; "+
		"req/s = provisions/s):\n\n")
	fmt.Fprintf(w, "| conns | target | req/s | p50 | p99 | CPU/req | × direct | × gateway memory | allocs/req |\n")
	fmt.Fprintf(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range rep.Provision {
		fmt.Fprintf(w, "| %d | %s | %.0f | %s | %s | %s | %.2f | %s | %.0f |\n",
			r.Conns, r.Target, r.RPS, fmtUS(r.P50), fmtUS(r.P99), fmtCPU(r.CPU), r.RatioDirect,
			fmtOptRatio(r.RatioMemory), r.Allocs)
	}
	fmt.Fprintln(w)
	for _, v := range rep.ProvisionVerdicts {
		fmt.Fprintf(w, "Verdict (provision): at %d connections the gateway with the bolt store completes %.0f provisions/s "+
			"(gateway memory %.0f, direct %.0f; bolt/memory %.2f, bolt/direct %.2f; %d non-201 answers or errors) (no target set)\n",
			v.Conns, v.BoltRPS, v.MemoryRPS, v.DirectRPS, v.BoltToMemory, v.BoltToDirect, v.Errors)
	}
}

// provisionRatio is pairedRatio for provision rows.
func provisionRatio(a, b *provisionRow) float64 {
	return pairedRatio(&row{RPS: a.RPS, RoundRPS: a.rounds}, &row{RPS: b.RPS, RoundRPS: b.rounds})
}
