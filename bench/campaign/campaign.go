package main

// One campaign: the cluster, the platforms and the nemesis, the drain,
// the views and the verdict.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

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
	if err := o.st.check(o.store); err != nil {
		return 0, err
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
	fmt.Fprintf(out, "campaign: seed %d, store %s, %d replica(s), %d platforms and %d that do not mitigate, %s, files in %s\n",
		o.seed, o.store, o.replicas, o.platforms, o.careless, o.duration, o.dir)
	if o.mutation != "" {
		fmt.Fprintf(out, "campaign: the gateway is built with the mutation %s (-tags %s): one promise broken on purpose\n", o.mutation, tagOf(o.mutation))
	}
	schedule := skipKinds(planAll(o.seed, o.duration, o.store, o.replicas, o.platforms, []string{"modern", "legacy"}, o.every), o.skip) // faults_more.go
	if o.st.failover {
		// A store that fails over is not also restarted empty: Sentinel
		// tracks the primary and its replica (failover.go).
		schedule = skipKinds(schedule, fRedisRestart)
	}
	schedule = withFailovers(schedule, o.seed, o.duration, o.store, o.st)
	schedule = skipKinds(withPgRestarts(schedule, o.seed, o.duration, o.store, o.st), o.skip) // pg_restart.go
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

	c, err := newCluster(o.dir, o.store, o.replicas, o.bin, gatewayTags(o.mutation), o.st)
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
	careless := map[int]string{}
	for i := range o.platforms + o.careless {
		t := tenants[i%len(tenants)]
		p := &platform{n: i, seed: o.seed, tenant: t, c: newCaller(t, tenantPassword(t), 8*time.Second),
			cl: c, h: h, brokers: c.brokers, inst: map[string]*pinst{}}
		if i >= o.platforms {
			p.style = []string{styleGivesUp, styleCrashes}[(i-o.platforms)%2]
			careless[i] = p.style
		}
		platforms = append(platforms, p)
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
	if err := waitQuiet(c, quietWithin(h)); err != nil { // faults_more.go
		stuck = append(stuck, violation{Rule: "c", What: err.Error()})
	}
	// The inventory's documented lag (checker_inventory.go) ends before
	// the views are read.
	_, faults := h.snapshot()
	time.Sleep(time.Until(inventoryCaughtUp(faults, o.store)))
	fmt.Fprintf(out, "campaign: +%s drained; checking\n", time.Since(t0).Round(time.Second))
	close(auditDone)

	v, err := collect(c, h, platforms)
	if err != nil {
		return 0, err
	}
	v.violations = append(stuck, v.violations...)
	v.audit = audit.seen()
	v.careless = careless
	if err := save(o.dir, v); err != nil {
		return 0, err
	}
	v.check()
	ops, faults := h.snapshot()
	report(out, v, ops, faults)
	fmt.Fprintf(out, "campaign: %d operations, %d faults, %d violations\n", len(ops), len(faults), len(v.violations))
	if len(v.violations) > 0 {
		fmt.Fprintf(out, "campaign: files kept in %s (check them again: -recheck %s); rerun with -seed %d -store %s -replicas %d -duration %s%s\n",
			o.dir, o.dir, o.seed, o.store, o.replicas, o.duration, o.st.flags())
		return len(v.violations), nil
	}
	if !o.keep {
		c.stop()
		_ = os.RemoveAll(o.dir)
	}
	return 0, nil
}

// waitQuiet waits until no lock remains and no orphan is due (a given-up or
// reported orphan is never due), at most within.
func waitQuiet(c *cluster, within time.Duration) error {
	deadline := time.Now().Add(within)
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
	return fmt.Errorf("not quiet %s after the platforms finished: %s", within, last)
}

// collect reads the three views.
func collect(c *cluster, h *history, platforms []*platform) (*verdict, error) {
	ops, faults := h.snapshot()
	v := &verdict{store: c.store, ops: ops, faults: faults, held: map[string]string{}, brokers: map[string]*brokerView{},
		shimmed: map[string]bool{"legacy": true}, fetched: map[string]bool{"legacy": true}, idempotent: map[string]bool{"legacy": true}}
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
	if first, rule := firstViolation(v, ops); !first.IsZero() {
		fmt.Fprintf(out, "campaign: the first violation, (%s), happened %s into the run\n", rule, first.Sub(ops[0].Start).Round(time.Second))
	}
}

// firstViolation is when the earliest violation that has a time happened,
// and its rule (a zero time: none has one).
func firstViolation(v *verdict, ops []*op) (time.Time, string) {
	var t time.Time
	rule := ""
	for _, x := range v.violations {
		if !x.At.IsZero() && len(ops) > 0 && (t.IsZero() || x.At.Before(t)) {
			t, rule = x.At, x.Rule
		}
	}
	return t, rule
}
