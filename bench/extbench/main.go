// Command extbench measures the gateway the way a user would see it: an
// external load generator process (wrk, closed loop; vegeta, open loop)
// against upstreams and proxies that each run as a process of their own,
// with each process's CPU time read from /proc. bench/loadbench, its
// in-process companion, runs generator, brokers and proxies in one process.
//
//	go run ./bench/extbench                                   # about 2½ minutes
//	go run ./bench/extbench -rounds 6 -duration 10s -open-duration 30s
//	go run ./bench/extbench -before /tmp/old/osb-gateway      # adds the gateway built elsewhere
//	go run ./bench/extbench -targets direct,gateway -profile gw.pprof
//
// Targets (-targets): direct, a Go server writing precomputed bytes (a 62 B
// last_operation answer); nginx with an upstream keep-alive pool; a bare
// tuned httputil.ReverseProxy (buffer pool, pooled transport, GOGC 400);
// the gateway (go build ./cmd/osb-gateway) in its default configuration
// (listen.server: lean, brokers[].transport: lean); the gateway on
// listen.server: standard (net/http's server: the lean server's share);
// the gateway on brokers[].transport: standard (Go's http.Transport, as
// the bare proxy);
// the gateway with tracing at 1 %, metrics and an audit file; and
// -before's binary in its default configuration.
//
// The closed loop runs wrk -t1 at -conns keep-alive connections for
// -rounds rounds of -duration, every target once per round, each round
// starting with the next target. A round where direct moves more than 10 %
// from its median is dropped. Ratios are medians of the per-round ratios;
// CPU µs/req is the target process's user+system time (nginx's with its
// workers) over the kept rounds divided by their requests; the kernel's
// share of it (system time) and the context switches per request (summed
// over the process's threads) come beside it. Then each target
// runs at one connection for -latency-duration (added p50: target minus
// direct), and at -rate requests/s for -open-duration under vegeta (added
// p50 and p99). The report is Markdown on standard output.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// options are the flags.
type options struct {
	rounds          int
	duration        time.Duration
	warmup          time.Duration
	conns           int
	latencyDuration time.Duration
	latencyRounds   int
	rate            int
	openDuration    time.Duration
	targets         []string
	before          string
	beforeLabel     string
	install         bool
	profile         string
	profileDuration time.Duration
	keep            bool
	logf            func(format string, args ...any)
	nginx           string // nginx's version, once started
}

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "extbench:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("extbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.rounds, "rounds", 3, "closed-loop `rounds` (every target once per round)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "each target's closed-loop run per round (whole seconds)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "each target's unmeasured run before the rounds; 0: none")
	fs.IntVar(&o.conns, "conns", 64, "closed-loop keep-alive `connections`")
	fs.DurationVar(&o.latencyDuration, "latency-duration", 2*time.Second, "each target's run at 1 connection; 0: none")
	fs.IntVar(&o.latencyRounds, "latency-rounds", 3, "`rounds` of the one-connection and the open-loop runs (every target once per round)")
	fs.IntVar(&o.rate, "rate", 2000, "open-loop `requests/s` (vegeta)")
	fs.DurationVar(&o.openDuration, "open-duration", 10*time.Second, "each target's open-loop run; 0: none")
	targets := fs.String("targets", strings.Join(allKeys, ","), "the `targets`, among "+strings.Join(allKeys, ","))
	fs.StringVar(&o.before, "before", "", "an osb-gateway `binary` built elsewhere (main's, say): the before row")
	fs.StringVar(&o.beforeLabel, "before-label", "before", "what the before row calls -before's build")
	fs.BoolVar(&o.install, "install", true, "install wrk (and nginx) with apt-get when missing and root")
	fs.StringVar(&o.profile, "profile", "", "after the rounds, write a CPU profile of the default gateway under load to this `file`")
	fs.DurationVar(&o.profileDuration, "profile-duration", 10*time.Second, "how long -profile profiles")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (configurations, binaries)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, k := range strings.Split(*targets, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !slices.Contains(allKeys, k) {
			fmt.Fprintf(stderr, "-targets: unknown target %q (want among %s)\n", k, strings.Join(allKeys, ","))
			return nil, fmt.Errorf("unknown target %q", k)
		}
		o.targets = append(o.targets, k)
	}
	if o.rounds < 1 || o.latencyRounds < 1 || o.conns < 1 || o.duration < time.Second || len(o.targets) == 0 {
		fmt.Fprintln(stderr, "want -rounds ≥ 1, -latency-rounds ≥ 1, -conns ≥ 1, -duration ≥ 1s and some -targets")
		return nil, fmt.Errorf("bad flags")
	}
	o.logf = func(format string, args ...any) { fmt.Fprintf(stderr, "extbench: "+format+"\n", args...) }
	return o, nil
}

// run runs the benchmark as o says and writes the report to w.
func run(ctx context.Context, o *options, w io.Writer) error {
	if err := ensureTool("wrk", "wrk", o.install, o.logf); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "extbench-")
	if err != nil {
		return err
	}
	if o.keep {
		o.logf("keeping %s", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	// Workers of an nginx started as root reach its directory.
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	o.logf("building the direct server, the bare proxy and the gateway")
	b, err := buildBins(ctx, dir)
	if err != nil {
		return err
	}
	ts, stop, err := startTargets(o, dir, b)
	if err != nil {
		return err
	}
	defer stop()
	rep := &report{opts: o, targets: ts, started: time.Now()}
	if err := closedLoop(ctx, o, ts, rep); err != nil {
		return err
	}
	if o.latencyDuration > 0 {
		if err := oneConnection(ctx, o, ts, rep); err != nil {
			return err
		}
	}
	if o.openDuration > 0 && o.rate > 0 {
		if err := openLoop(ctx, o, dir, ts, rep); err != nil {
			return err
		}
	}
	rep.write(w)
	if o.profile != "" {
		return profileGateway(ctx, o, dir, b)
	}
	return nil
}

// closedLoop runs the warm-up and the rounds.
func closedLoop(ctx context.Context, o *options, ts []*target, rep *report) error {
	if o.warmup > 0 {
		o.logf("warming up every target (%s at %d connections)", o.warmup, o.conns)
		for _, t := range ts {
			if _, err := measure(ctx, t, o.conns, o.warmup); err != nil {
				return err
			}
		}
	}
	for r := range o.rounds {
		o.logf("round %d of %d", r+1, o.rounds)
		round := map[string]sample{}
		for i := range ts {
			t := ts[(i+r)%len(ts)]
			s, err := measure(ctx, t, o.conns, o.duration)
			if err != nil {
				return err
			}
			round[t.key] = s
		}
		rep.rounds = append(rep.rounds, round)
	}
	return nil
}

// oneConnection runs every target at one connection for -latency-rounds
// rounds, each round starting with the next target.
func oneConnection(ctx context.Context, o *options, ts []*target, rep *report) error {
	for r := range o.latencyRounds {
		o.logf("one connection, %s per target (round %d of %d)", o.latencyDuration, r+1, o.latencyRounds)
		round := map[string]sample{}
		for i := range ts {
			t := ts[(i+r+1)%len(ts)]
			s, err := measure(ctx, t, 1, o.latencyDuration)
			if err != nil {
				return err
			}
			round[t.key] = s
		}
		rep.single = append(rep.single, round)
	}
	return nil
}

// openLoop builds vegeta and runs every target at o.rate.
func openLoop(ctx context.Context, o *options, dir string, ts []*target, rep *report) error {
	o.logf("building %s", vegetaModule)
	bin, err := installVegeta(ctx, dir)
	if err != nil {
		o.logf("no open-loop run: %v", err)
		rep.openSkipped = err.Error()
		return nil
	}
	for r := range o.latencyRounds {
		round := map[string]vegetaResult{}
		for i := range ts {
			t := ts[(i+r)%len(ts)]
			o.logf("open loop: %s at %d req/s for %s (round %d of %d)", t.name, o.rate, o.openDuration, r+1, o.latencyRounds)
			before, err := t.proc.usage()
			if err != nil {
				return fmt.Errorf("%s: CPU time: %w", t.name, err)
			}
			v, err := runVegeta(ctx, bin, dir, t.url, t.header, o.rate, o.openDuration)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			after, err := t.proc.usage()
			if err != nil {
				return fmt.Errorf("%s: CPU time: %w", t.name, err)
			}
			v.used = usedBy(after.Sub(before))
			if len(v.errors) > 0 {
				o.logf("open loop: %s: %.2f %% succeeded; errors: %s", t.name, v.success*100, strings.Join(v.errors, "; "))
			}
			round[t.key] = v
		}
		rep.open = append(rep.open, round)
	}
	return nil
}

// sample is one closed-loop run of a target.
type sample struct {
	wrkResult
	used // by the target's process
}

// used is what a target's process used over a run, from /proc.
type used struct {
	cpu      time.Duration // user and system
	sys      time.Duration // of it, system: the kernel's work for it
	switches int64         // its threads' context switches
}

func usedBy(u reference.Usage) used { return used{cpu: u.CPU(), sys: u.System, switches: u.Switches} }

// measure runs wrk against t and reads t's process usage around it.
func measure(ctx context.Context, t *target, conns int, d time.Duration) (sample, error) {
	before, err := t.proc.usage()
	if err != nil {
		return sample{}, fmt.Errorf("%s: CPU time: %w", t.name, err)
	}
	r, err := runWrk(ctx, t.url, t.header, conns, d)
	if err != nil {
		return sample{}, fmt.Errorf("%s: %w", t.name, err)
	}
	after, err := t.proc.usage()
	if err != nil {
		return sample{}, fmt.Errorf("%s: CPU time: %w", t.name, err)
	}
	if r.failed > 0 {
		return sample{}, fmt.Errorf("%s: %d of %d requests failed (non-2xx or socket errors)", t.name, r.failed, r.requests)
	}
	return sample{wrkResult: r, used: usedBy(after.Sub(before))}, nil
}

// cores is what the report says about the machine.
func cores() string {
	return fmt.Sprintf("%d cores (GOMAXPROCS %d)", runtime.NumCPU(), runtime.GOMAXPROCS(0))
}
