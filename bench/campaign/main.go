// Command campaign is the gateway's fault campaign: it starts real gateway
// processes in front of real sample broker processes (their state on disk,
// so that a kill -9 is a real crash), runs simulated platforms that behave
// as Cloud Controller does, lets a nemesis inject seeded faults (kill -9 of
// gateways and brokers, SIGSTOP of Redis or PostgreSQL, broker errors, latency and
// hangs, slow, stalled and reset links, clients that half-close or hang
// up; and a real deployment's: Redis restarted empty, one replica cut off
// from the store, a replica's wall clock stepped, a full disk under bolt,
// SIGTERM rolling restarts and reloads), then drains and checks three
// independent views against the gateway's promises. See docs/faults.md.
//
//	go run ./bench/campaign -duration 60s -seed 1 -store bolt -replicas 1
//	go run ./bench/campaign -duration 60s -seed 1 -store redis -replicas 2
//	go run ./bench/campaign -duration 60s -seed 1 -store postgres -replicas 2
//	go run ./bench/campaign -duration 20m -store redis -replicas 2 -store-failover -replica-acks 1
//
//	go run ./bench/campaign -mutation lock-free -duration 3m -store redis -replicas 2
//	go run ./bench/campaign -recheck /tmp/osb-campaign-123
//
// Its last line reads "campaign: N operations, F faults, V violations"; it
// exits 1 when V > 0.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

func main() {
	code, err := run(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "campaign:", err)
		os.Exit(2)
	}
	os.Exit(code)
}

type options struct {
	name      string // prefixes its output lines when several run at once
	duration  time.Duration
	seed      uint64
	store     string
	replicas  int
	platforms int
	every     time.Duration
	dir       string
	keep      bool
	verbose   bool
	bin       string // prebuilt binaries; empty: build them
	giveUp    time.Duration
	careless  int    // platforms that do not mitigate orphans, after the others
	mutation  string // the gateway is built with this mutation (internal/mutation)
	skip      string // fault kinds left out of the schedule, comma-separated
	st        storeOpts
	out       io.Writer
}

// ciRuns is the short campaign CI runs (-ci): the three stores at once, fixed
// seeds; its verdict is the sum of theirs.
var ciRuns = []options{
	{name: "bolt", seed: 1, store: "bolt", replicas: 1},
	{name: "redis", seed: 2, store: "redis", replicas: 2},
	{name: "postgres", seed: 3, store: "postgres", replicas: 2},
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("campaign", flag.ContinueOnError)
	var o options
	ci := fs.Bool("ci", false, "the CI campaign: -store bolt -seed 1, -store redis -replicas 2 -seed 2 and -store postgres -replicas 2 -seed 3 side by side, for -duration (default 30s here)")
	fs.DurationVar(&o.duration, "duration", time.Minute, "how long the platforms and the nemesis run (the drain and the check come after)")
	fs.Uint64Var(&o.seed, "seed", 1, "the seed of the fault schedule and of every platform's choices")
	fs.StringVar(&o.store, "store", "bolt", "the gateways' state: bolt (one file per replica), redis (a redis-server it starts, shared) or postgres (a PostgreSQL server it starts, shared)")
	fs.IntVar(&o.replicas, "replicas", 1, "gateway replicas (with bolt, use 1: replicas must share state)")
	fs.IntVar(&o.platforms, "platforms", 4, "simulated platforms, two workers each")
	fs.DurationVar(&o.every, "fault-every", 2500*time.Millisecond, "the mean time between two faults")
	fs.StringVar(&o.dir, "dir", "", "where processes keep their files and logs (default: a new temporary directory)")
	fs.BoolVar(&o.keep, "keep", false, "keep -dir after a run without violations")
	fs.BoolVar(&o.verbose, "v", false, "print every fault as it ends")
	fs.DurationVar(&o.giveUp, "give-up", 3*time.Minute, "after the nemesis stops, how long platforms retry what does not end")
	fs.StringVar(&o.bin, "bin", "", "a directory with osb-gateway and osb-sample-broker already built (default: go build them)")
	fs.IntVar(&o.careless, "careless", 2, "platforms that do not mitigate orphans, besides -platforms: the first gives up on a create whose outcome it did not learn, the second also crashes in the middle of half its provisions and binds; the gateway's own orphan mitigation must clean up after both")
	fs.StringVar(&o.mutation, "mutation", "", "build the gateway with one promise broken on purpose (see internal/mutation): "+strings.Join(mutationNames(), ", "))
	fs.StringVar(&o.skip, "skip", "", "fault kinds to leave out of the schedule, comma-separated (e.g. clock-jump,redis-restart); the others stay as the seed drew them")
	fs.BoolVar(&o.st.failover, "store-failover", false, "run the store (redis or postgres) as a primary and a replica, and fail it over (kill -9 of the primary, the replica promoted): with redis a Sentinel promotes a replica that lags, with postgres the standby is synchronous")
	fs.DurationVar(&o.st.every, "failover-every", 45*time.Second, "with -store-failover, the mean time between two failovers (on top of the other faults)")
	fs.IntVar(&o.st.acks, "replica-acks", 0, "with -store redis -store-failover, the gateways' state.redis.replica_acks: each write a promise rests on waits for this many replicas")
	recheck := fs.String("recheck", "", "check again, offline, the run whose files are in this directory (kept with -keep, or after violations)")
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.out = os.Stdout
	if *recheck != "" {
		v, err := recheckDir(*recheck, o.out)
		if err != nil {
			return 0, err
		}
		return min(v, 1), nil
	}
	if o.mutation != "" && tagOf(o.mutation) == "" {
		return 0, fmt.Errorf("-mutation %q: want one of %s", o.mutation, strings.Join(mutationNames(), ", "))
	}
	if *ci && o.mutation != "" {
		return 0, fmt.Errorf("-ci runs the real gateway: no -mutation")
	}
	if !*ci {
		v, err := campaign(o)
		if err != nil {
			return 0, err
		}
		return min(v, 1), nil
	}
	if !flagSet(fs, "duration") {
		o.duration = 30 * time.Second
	}
	if o.bin == "" {
		dir, err := os.MkdirTemp("", "osb-campaign-bin-")
		if err != nil {
			return 0, err
		}
		defer os.RemoveAll(dir)
		if _, _, err := build(dir, "", baseTags); err != nil {
			return 0, err
		}
		o.bin = dir
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
		errs  []error
	)
	for _, r := range ciRuns {
		r.duration, r.platforms, r.every, r.keep, r.verbose, r.bin, r.giveUp = o.duration, o.platforms, o.every, o.keep, o.verbose, o.bin, o.giveUp
		r.careless = o.careless
		r.out = &prefixed{prefix: "[" + r.name + "] ", w: os.Stdout}
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := campaign(r)
			mu.Lock()
			defer mu.Unlock()
			total += v
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.name, err))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	fmt.Printf("campaign: %d violations in the CI campaign\n", total)
	return min(total, 1), nil
}

// flagSet reports whether the flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// prefixed writes whole lines to w, each after prefix.
type prefixed struct {
	prefix string
	w      io.Writer
	mu     sync.Mutex
}

var outMu sync.Mutex // one line at a time on standard output

func (p *prefixed) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	outMu.Lock()
	defer outMu.Unlock()
	for _, line := range strings.SplitAfter(string(b), "\n") {
		if line != "" {
			fmt.Fprint(p.w, p.prefix+line)
		}
	}
	return len(b), nil
}
