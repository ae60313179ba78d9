// Command campaign is the gateway's fault campaign: it starts real gateway
// processes in front of real sample broker processes (their state on disk,
// so that a kill -9 is a real crash), runs simulated platforms that behave
// as Cloud Controller does, lets a nemesis inject seeded faults (kill -9 of
// gateways and brokers, SIGSTOP of Redis or PostgreSQL, broker errors, latency and
// hangs, slow, stalled and reset links, clients that half-close or hang
// up), then drains and checks three independent views against the
// gateway's promises. See docs/faults.md.
//
//	go run ./bench/campaign -duration 60s -seed 1 -store bolt -replicas 1
//	go run ./bench/campaign -duration 60s -seed 1 -store redis -replicas 2
//	go run ./bench/campaign -duration 60s -seed 1 -store postgres -replicas 2
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
	"path/filepath"
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
	out       io.Writer
}

// ciRuns is the short campaign CI runs (-ci): both stores at once, fixed
// seeds; its verdict is the sum of theirs.
var ciRuns = []options{
	{name: "bolt", seed: 1, store: "bolt", replicas: 1},
	{name: "redis", seed: 2, store: "redis", replicas: 2},
}

func run(args []string) (int, error) {
	fs := flag.NewFlagSet("campaign", flag.ContinueOnError)
	var o options
	ci := fs.Bool("ci", false, "the CI campaign: -store bolt -seed 1 and -store redis -replicas 2 -seed 2 side by side, for -duration (default 30s here)")
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
	if err := fs.Parse(args); err != nil {
		return 0, err
	}
	if fs.NArg() > 0 {
		return 0, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	o.out = os.Stdout
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
		if _, _, err := build(dir, ""); err != nil {
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

// campaign runs one campaign and returns its number of violations.
func campaign(o options) (int, error) {
	switch {
	case o.store != "bolt" && o.store != "redis" && o.store != "postgres":
		return 0, fmt.Errorf("-store %q: want bolt, redis or postgres", o.store)
	case o.store == "bolt" && o.replicas != 1:
		return 0, fmt.Errorf("-store bolt -replicas %d: replicas share state only through redis or postgres", o.replicas)
	case o.replicas < 1 || o.platforms < 1:
		return 0, fmt.Errorf("-replicas and -platforms must be at least 1")
	}
	if o.dir == "" {
		d, err := os.MkdirTemp("", "osb-campaign-")
		if err != nil {
			return 0, err
		}
		o.dir = d
	} else if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return 0, err
	}
	out := o.out
	fmt.Fprintf(out, "campaign: seed %d, store %s, %d replica(s), %d platforms, %s, files in %s\n", o.seed, o.store, o.replicas, o.platforms, o.duration, o.dir)
	schedule := plan(o.seed, o.duration, o.store, o.replicas, o.platforms, []string{"modern", "legacy"}, o.every)
	sched, err := os.Create(filepath.Join(o.dir, "schedule.txt"))
	if err != nil {
		return 0, err
	}
	for _, f := range schedule {
		fmt.Fprintln(sched, f)
	}
	sched.Close()
	fmt.Fprintf(out, "campaign: %d faults planned (also in %s):\n", len(schedule), sched.Name())
	for _, f := range schedule {
		fmt.Fprintf(out, "  %s\n", f)
	}

	c, err := newCluster(o.dir, o.store, o.replicas, o.bin)
	if err != nil {
		return 0, err
	}
	defer c.stop()
	oplog, err := os.Create(filepath.Join(o.dir, "history.jsonl"))
	if err != nil {
		return 0, err
	}
	defer oplog.Close()
	h := &history{log: oplog}
	var platforms []*platform
	for i := range o.platforms {
		t := tenants[i%len(tenants)]
		platforms = append(platforms, &platform{n: i, seed: o.seed, tenant: t, c: newCaller(t, tenantPassword(t), 8*time.Second),
			cl: c, h: h, brokers: c.brokers, inst: map[string]*pinst{}})
	}
	logf := func(format string, args ...any) {
		if o.verbose {
			fmt.Fprintf(out, format+"\n", args...)
		}
	}
	n := &nemesis{c: c, platforms: platforms, h: h, logf: logf}

	t0 := time.Now()
	var workers sync.WaitGroup
	for _, p := range platforms {
		for w := range 2 {
			workers.Add(1)
			go func() { defer workers.Done(); p.run(w) }()
		}
	}
	stop := make(chan struct{})
	audit := &lockAudit{locks: map[string]*seenLock{}}
	auditDone := make(chan struct{})
	go audit.run(c, 2*time.Second, auditDone)
	nemesisDone := make(chan struct{})
	go func() { n.run(t0, schedule, stop); close(nemesisDone) }()
	time.Sleep(o.duration)
	close(stop)
	<-nemesisDone
	fmt.Fprintf(out, "campaign: +%s nemesis stopped; draining\n", time.Since(t0).Round(time.Second))

	// Drain: every process up, every fault healed, the platforms finish what
	// they began, the gateways' orphan schedules and holds run out.
	for _, b := range c.brokers {
		_, _ = b.control("DELETE", "fault", nil)
		b.link.heal()
	}
	if c.storeLink != nil {
		c.storeLink.heal()
	}
	giveUp := time.Now().Add(o.giveUp)
	for _, p := range platforms {
		p.giveUp.Store(&giveUp)
		p.draining.Store(true)
	}
	drained := make(chan struct{})
	go func() { workers.Wait(); close(drained) }()
	var stuck []violation
	select {
	case <-drained:
	case <-time.After(5 * time.Minute):
		stuck = append(stuck, violation{Rule: "c", What: "the platforms' calls did not end within 5 minutes of the nemesis stopping"})
	}
	if err := waitQuiet(c); err != nil {
		stuck = append(stuck, violation{Rule: "c", What: err.Error()})
	}
	fmt.Fprintf(out, "campaign: +%s drained; checking\n", time.Since(t0).Round(time.Second))
	close(auditDone)

	v, err := collect(c, h, platforms)
	if err != nil {
		return 0, err
	}
	v.violations = append(stuck, v.violations...)
	v.audit = audit.seen()
	v.check()
	ops, faults := h.snapshot()
	report(out, v, ops, faults)
	fmt.Fprintf(out, "campaign: %d operations, %d faults, %d violations\n", len(ops), len(faults), len(v.violations))
	if len(v.violations) > 0 {
		fmt.Fprintf(out, "campaign: files kept in %s; rerun with -seed %d -store %s -replicas %d -duration %s\n", o.dir, o.seed, o.store, o.replicas, o.duration)
		return len(v.violations), nil
	}
	if !o.keep {
		c.stop()
		_ = os.RemoveAll(o.dir)
	}
	return 0, nil
}

// waitQuiet waits until no lock remains and no orphan is due (a given-up or
// reported orphan is never due), at most two minutes.
func waitQuiet(c *cluster) error {
	deadline := time.Now().Add(2 * time.Minute)
	var last string
	for time.Now().Before(deadline) {
		ls, err1 := c.locks()
		orphans, err2 := c.orphans()
		due := 0
		for _, o := range orphans {
			if o.NextAttempt.Year() < 9999 {
				due++
			}
		}
		if err1 == nil && err2 == nil && len(ls) == 0 && due == 0 {
			return nil
		}
		last = fmt.Sprintf("%d locks, %d orphans due (errors: %v, %v)", len(ls), due, err1, err2)
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("not quiet two minutes after the platforms finished: %s", last)
}

// collect reads the three views.
func collect(c *cluster, h *history, platforms []*platform) (*verdict, error) {
	ops, faults := h.snapshot()
	v := &verdict{store: c.store, ops: ops, faults: faults, held: map[string]string{}, brokers: map[string]*brokerView{},
		shimmed: map[string]bool{"legacy": true}, fetched: map[string]bool{"legacy": true}}
	for _, p := range platforms {
		in, bs := p.holds()
		for k, b := range in {
			v.held[k] = b
		}
		for k, b := range bs {
			v.held[k] = b
		}
	}
	for _, b := range c.brokers {
		ins, bs, err := b.holdings()
		if err != nil {
			return nil, fmt.Errorf("broker %s holdings: %w", b.name, err)
		}
		bv := &brokerView{instances: map[string]bool{}, bindings: map[string]bool{}}
		for _, i := range ins {
			bv.instances[i] = true
		}
		for _, x := range bs {
			bv.bindings[x] = true
		}
		if bv.calls, err = readCallLog(b.callLog); err != nil {
			return nil, err
		}
		v.brokers[b.name] = bv
	}
	gw, err := c.view()
	if err != nil {
		return nil, err
	}
	v.gw = gw
	return v, nil
}

// report prints the violations and a summary of what ran.
func report(out io.Writer, v *verdict, ops []*op, faults []*fault) {
	kinds := map[string]int{}
	for _, o := range ops {
		kinds[o.Kind]++
	}
	var parts []string
	for _, k := range sortedKeys(kinds) {
		parts = append(parts, fmt.Sprintf("%s %d", k, kinds[k]))
	}
	fmt.Fprintf(out, "campaign: operations: %s\n", strings.Join(parts, ", "))
	fk := map[string]int{}
	for _, f := range faults {
		fk[f.Kind]++
	}
	parts = parts[:0]
	for _, k := range sortedKeys(fk) {
		parts = append(parts, fmt.Sprintf("%s %d", k, fk[k]))
	}
	fmt.Fprintf(out, "campaign: faults: %s\n", strings.Join(parts, ", "))
	for _, n := range v.notes {
		fmt.Fprintln(out, "campaign: note:", n)
	}
	for _, x := range v.violations {
		fmt.Fprintln(out, x)
	}
}
