// Command loadbench measures what the gateway costs on loopback. In one
// invocation it reaches the in-memory sample broker four ways — directly, through a
// bare tuned httputil.ReverseProxy (the floor any Go proxy pays), through the
// real gateway (proxy.New with a realistic configuration), and through nginx
// when an nginx binary is on PATH — and sends each pass-through GETs
// (GET /v2/catalog and GET .../last_operation) at several connection counts
// for a fixed time.
//
// It prints, per request kind and connection count, each target's
// requests per second, p50 and p99 latency, CPU time per request (this
// process's, which includes the load generator and the broker, plus nginx's
// processes for nginx), the CPU each proxy adds over direct, and throughput
// ratios; then the gateway's chain cost over the bare proxy and the stage
// verdict. Figures are meant to be read as ratios within one run: the
// machine is shared.
//
// Two more request kinds measure the gateway's catalog cache, each against
// its own brokers (see cache.go): catalog-cache compares the sample broker
// (precomputed catalog bytes) and a second sample broker that takes 5 ms per
// request, as a broker composing its catalog would, with the gateway in
// front of the 5 ms broker, and counts the catalog requests that reach the
// broker while the gateway is measured; catalog-1mb serves a 1 MiB catalog
// from precomputed bytes directly and through the gateway, checks that the
// bytes arrive unchanged, and reports the heap allocated per request.
//
// Two more request kinds run only when -requests names them (extra.go),
// both GET last_operation: tls sends it to the gateway over plain HTTP and
// over TLS (keep-alive, one handshake per connection) and reports the
// ratio; tracing sends it to a gateway with tracing, metrics and audit off
// and to gateways with all of them on, sampling 1% and 100% of traces into
// a real batch span processor, and holds them to 90% and 75% of the all-off
// throughput.
//
// One more request kind runs only when -requests names it (provision.go):
// provision sends synchronous provisions of the sample broker's sync plan,
// a new instance per request, directly and through gateways whose
// operation locks are kept in the in-memory and in the bolt state store,
// and reports provisions per second and the bolt/memory ratio.
//
// And protect (protect.go), run on its own gateways and brokers: the
// per-broker concurrency cap shedding an open-loop overload at three times
// its capacity, and the circuit breaker through a broker's one-second
// outage.
//
// And one more (authflood.go): auth-flood sends GET last_operation as a
// tenant whose credential is a bcrypt hash, undisturbed and while 40 wrong
// passwords a second arrive from one other client address, from 40, and
// from 199 that hold their connections (issue 28's spread flood), and
// holds the legitimate calls' p99 under the single-address and the spread
// floods to twice the undisturbed p99 of the same run, with no legitimate
// call answered 429 or 503 under the spread flood.
//
// And the last (pollshield.go): poll-shield polls -poll-ops async
// operations, each every -poll-interval from each of -poll-pollers
// pollers, for -poll-duration per run, directly and through gateways with
// the poll shield at its defaults and with poll.min_interval 10s, and
// reports the broker's last_operation calls per second against direct's
// and the p99 each gateway adds.
//
// Usage:
//
//	go run ./bench/loadbench [-duration 1s] [-warmup 250ms] [-conns 1,16,64]
//		[-requests catalog,last_operation,catalog-cache,catalog-1mb,tls,tracing,provision,auth-flood,poll-shield,protect]
//		[-poll-ops 1000] [-poll-pollers 1,3] [-poll-interval 1s] [-poll-duration 10s]
//		[-nginx auto|off] [-rounds 4] [-json] [-cpuprofile file]
//
// All traffic stays on 127.0.0.1, and the program stops by itself after
// about (warmup+duration) × (rounds+1) × connection counts × the targets of
// every kind.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/gctune"
)

// Request kinds, as named by -requests.
const (
	kindCatalog       = "catalog"
	kindLastOperation = "last_operation"
	kindCatalogCache  = "catalog-cache" // the cached catalog against a 5 ms broker (cache.go)
	kindCatalogLarge  = "catalog-1mb"   // a 1 MiB cached catalog (cache.go)
)

// allKinds are the request kinds, in the order -requests lists them by
// default.
var allKinds = []string{kindCatalog, kindLastOperation, kindCatalogCache, kindCatalogLarge}

// knownKinds are every request kind -requests accepts: allKinds and the
// kinds run only when asked for (extra.go).
var knownKinds = append(slices.Clone(allKinds), kindTLS, kindTracing, kindProvision, kindAuthFlood, kindPollShield, kindProtect)

// options are the command's flags.
type options struct {
	duration   time.Duration
	warmup     time.Duration
	conns      []int
	kinds      []string
	nginx      string // "auto" or "off"
	rounds     int
	json       bool
	cpuprofile string
	// The poll-shield kind's (pollshield.go).
	pollOps      int
	pollPollers  []int
	pollInterval time.Duration
	pollDuration time.Duration
}

func main() {
	opts, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(2)
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, opts, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "loadbench:", err)
		os.Exit(1)
	}
}

// parseFlags reads and checks the command line.
func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("loadbench", flag.ContinueOnError)
	fs.DurationVar(&o.duration, "duration", time.Second, "measured `time` per target, request kind, connection count and round")
	fs.DurationVar(&o.warmup, "warmup", 250*time.Millisecond, "unmeasured warm-up `time` before each measured run")
	conns := fs.String("conns", "1,16,64", "comma-separated concurrent connection `counts`")
	kinds := fs.String("requests", strings.Join(allKinds, ","), "comma-separated request `kinds`: "+strings.Join(knownKinds, ", ")+" (tls, tracing, provision, auth-flood, poll-shield and protect only when named)")
	fs.IntVar(&o.pollOps, "poll-ops", 1000, "poll-shield: `number` of async operations polled")
	pollers := fs.String("poll-pollers", "1,3", "poll-shield: comma-separated `counts` of pollers per operation")
	fs.DurationVar(&o.pollInterval, "poll-interval", time.Second, "poll-shield: `time` between two polls of one poller")
	fs.DurationVar(&o.pollDuration, "poll-duration", 10*time.Second, "poll-shield: measured `time` per target, pollers count and round, after a warm-up as long")
	fs.StringVar(&o.nginx, "nginx", "auto", "`mode`: auto (run nginx when on PATH) or off")
	fs.IntVar(&o.rounds, "rounds", 4, "`number` of interleaved rounds per cell (more rounds even out a noisy machine; ratios are the median of the rounds' from 3 on)")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON instead of markdown")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to `file` (samples carry the label role=load|broker|bare|gateway)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var errs []error
	if o.duration <= 0 || o.warmup < 0 {
		errs = append(errs, errors.New("-duration must be positive and -warmup not negative"))
	}
	for _, f := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxConnsPerTarget {
			errs = append(errs, fmt.Errorf("-conns: %q is not a count from 1 to %d", f, maxConnsPerTarget))
			continue
		}
		o.conns = append(o.conns, n)
	}
	for _, k := range strings.Split(*kinds, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(knownKinds, k) {
			errs = append(errs, fmt.Errorf("-requests: %q is not one of %s", k, strings.Join(knownKinds, ", ")))
			continue
		}
		o.kinds = append(o.kinds, k)
	}
	for _, f := range strings.Split(*pollers, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > 100 {
			errs = append(errs, fmt.Errorf("-poll-pollers: %q is not a count from 1 to 100", f))
			continue
		}
		o.pollPollers = append(o.pollPollers, n)
	}
	if o.pollOps < 1 || o.pollInterval <= 0 || o.pollDuration <= 0 {
		errs = append(errs, errors.New("-poll-ops, -poll-interval and -poll-duration must be positive"))
	}
	if o.nginx != "auto" && o.nginx != "off" {
		errs = append(errs, fmt.Errorf("-nginx: %q is not auto or off", o.nginx))
	}
	if o.rounds < 1 {
		errs = append(errs, errors.New("-rounds must be at least 1"))
	}
	return o, errors.Join(errs...)
}

// run sets up the targets, measures every cell and prints the report to
// out; progress goes to progress.
func run(ctx context.Context, o options, out, progress io.Writer) error {
	gogc, floor, stopGC := applyGC()
	defer stopGC()
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	var protect *protectReport
	if slices.Contains(o.kinds, kindProtect) { // its own gateways and brokers (protect.go)
		o.kinds = slices.DeleteFunc(slices.Clone(o.kinds), func(k string) bool { return k == kindProtect })
		var err error
		if protect, err = runProtect(ctx, o.rounds, o.duration, progress); err != nil {
			return fmt.Errorf("protect: %w", err)
		}
	}
	e, err := newEnv(largeCatalogSize)
	if err != nil {
		return err
	}
	defer e.close()
	m := meta{GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(),
		GOGC: gogc, HeapFloor: floor, Duration: o.duration.String(), Warmup: o.warmup.String(), Rounds: o.rounds}
	var notes []string
	if note := e.addNginx(o.nginx, &m); note != "" {
		notes = append(notes, note)
		fmt.Fprintln(progress, "note:", note)
	}
	if err := e.startExtra(o.kinds); err != nil {
		return err
	}
	m.Targets = e.targetNames(o.kinds)
	if m.Catalogs, err = e.check(o.kinds); err != nil {
		return err
	}
	fmt.Fprintf(progress, "GOGC=%d, heap floor %s (the gateway's runtime defaults), GOMAXPROCS=%d; targets: %s\n",
		gogc, floor, m.GOMAXPROCS, strings.Join(m.Targets, ", "))
	samples, err := e.measure(ctx, o, progress)
	if err != nil {
		return err
	}
	rep := buildReport(m, o.kinds, o.conns, samples)
	rep.Protect = protect
	rep.Notes = notes
	if slices.Contains(o.kinds, kindPollShield) {
		rep.Meta.PollOps, rep.Meta.PollInterval, rep.Meta.PollDuration = o.pollOps, o.pollInterval.String(), o.pollDuration.String()
		if rep.PollShield, err = runPollShield(ctx, o, progress); err != nil {
			return fmt.Errorf("poll-shield: %w", err)
		}
	}
	if o.json {
		return rep.writeJSON(out)
	}
	rep.writeMarkdown(out)
	return nil
}

// applyGC applies the gateway's default GC policy (runtime.heap_floor over
// runtime.gc_percent, kept by a gctune.Tuner), unless the GOGC environment
// variable is set, which wins there too; it returns the base GC percent,
// the floor ("off" under GOGC) and what stops the tuner. Every target runs
// in this process, so all get the same.
func applyGC() (percent int, floor string, stop func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return gctune.GCPercent(), "off", func() {}
	}
	rc := config.Runtime{HeapFloor: config.DefaultHeapFloor, GCPercent: config.DefaultGCPercent}
	t := gctune.Start(rc.HeapFloorBytes(), rc.GCPercent)
	return rc.GCPercent, rc.HeapFloor, t.Stop
}

// addNginx adds the nginx target when mode allows and nginx is on PATH; it
// returns a note when nginx is skipped.
func (e *env) addNginx(mode string, m *meta) string {
	if mode == "off" {
		return "nginx skipped (-nginx off)"
	}
	v := reference.NginxVersion()
	if v == "" {
		return "nginx skipped: no nginx binary on PATH"
	}
	t, err := startNginx(e.broker.base)
	if err != nil {
		return fmt.Sprintf("nginx skipped: %v", err)
	}
	t.catalogRequests = e.broker.catalogRequests
	e.closers = append(e.closers, t.close)
	e.targets = append(e.targets, t)
	m.Nginx = v
	return ""
}

// measure runs every cell: per request kind and connection count, every
// target of the kind in turn, rounds times, starting each round with the
// next target so that no target always runs first.
func (e *env) measure(ctx context.Context, o options, progress io.Writer) (map[cell]*sample, error) {
	samples := map[cell]*sample{}
	for _, kind := range o.kinds {
		path, err := e.requestPath(kind)
		if err != nil {
			return nil, err
		}
		for _, n := range o.conns {
			targets := e.targetsFor(kind)
			if o.rounds > 1 {
				// One unmeasured run per target first: a target's first run
				// at a connection count pays for filling its pools, caches
				// and heap (the gateway's catalog for validation, its
				// connections to the broker), which would otherwise count
				// against whichever target happens to run first.
				for _, t := range targets {
					if _, err := load(ctx, loadSpec(kind, t, path, spec{conns: n, warmup: 0, measure: o.warmup + o.duration,
						extraCPU: t.extraCPU})); err != nil {
						return nil, fmt.Errorf("%s, %d conns, %s (warm-up): %w", kind, n, t.name, err)
					}
				}
			}
			for round := range o.rounds {
				for i := range targets {
					t := targets[(i+round)%len(targets)]
					up := t.catalogRequests
					if t.counter != nil {
						up = t.counter
					}
					var side func(context.Context) (func(), func() *floodStats)
					if t.flood != nil {
						side = t.flood.start
					}
					s, err := load(ctx, loadSpec(kind, t, path, spec{conns: n,
						warmup: o.warmup, measure: o.duration, extraCPU: t.extraCPU, upstream: up, side: side}))
					if err != nil {
						return nil, fmt.Errorf("%s, %d conns, %s: %w", kind, n, t.name, err)
					}
					fmt.Fprintf(progress, "%-14s %3d conns  %-14s %8.0f req/s  p50 %-9s p99 %-9s errors %d\n",
						kind, n, t.name, float64(s.requests)/s.elapsed.Seconds(),
						fmtUS(us(s.hist.quantile(0.5))), fmtUS(us(s.hist.quantile(0.99))), total(s.errors))
					c := cell{kind, n, t.name}
					if samples[c] == nil {
						samples[c] = &sample{}
					}
					samples[c].add(s)
				}
			}
		}
	}
	return samples, nil
}

// total sums the counts in m.
func total(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
