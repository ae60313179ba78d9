package main

// A PostgreSQL server that crashes and restarts on its own data: kill -9
// of the postmaster and every process it runs, then postgres again on the
// same directory, which replays its WAL. Every commit the gateways were
// told of is in it (synchronous_commit on), so a restart is an outage and
// nothing more: while it lasts, as a pause, mutating calls 503.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// fPgRestart kills PostgreSQL (kill -9, PID-verified, its processes too)
// and starts it again on its data after For.
const fPgRestart = "postgres-restart"

// withPgRestarts adds to schedule the restarts of -store postgres without
// -store-failover (whose failovers kill the primary already): one every
// 45 to 75 s from +30 s, drawn from a source of their own, so that the
// rest of the schedule is the seed's as without them (-skip
// postgres-restart replays a run from before). The faults are renumbered
// in time order.
func withPgRestarts(schedule []*fault, seed uint64, d time.Duration, store string, st storeOpts) []*fault {
	if store != "postgres" || st.failover {
		return schedule
	}
	rng := rand.New(rand.NewPCG(seed, 0x9e57a7))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	out := append([]*fault(nil), schedule...)
	for at := 30*time.Second + dur(0, 15*time.Second); at < d; at += dur(45*time.Second, 75*time.Second) {
		out = append(out, &fault{At: at, Kind: fPgRestart, Target: store, For: dur(200*time.Millisecond, 2*time.Second)})
	}
	slices.SortStableFunc(out, func(a, b *fault) int { return int(a.At - b.At) })
	for i, f := range out {
		f.N = i + 1
	}
	return out
}

// restartPostgres is the fault: the server and its processes killed
// (checked gone by PID and port), and after f.For started again on its
// data, which it recovers from the WAL; checked by its new PID. It holds
// the server's fault lock, as a pause does.
func (n *nemesis) restartPostgres(f *fault) error {
	p := n.c.postgres
	p.faultMu.Lock()
	defer p.faultMu.Unlock()
	f.Start = time.Now()
	pid, err := p.crash()
	f.PID = pid
	if err != nil {
		return err
	}
	time.Sleep(f.For)
	if err := p.serve(); err != nil {
		return err
	}
	if f.NewPID = p.pid(); f.NewPID == pid || !p.running() {
		return fmt.Errorf("postgres restarted as pid %d (running: %v), killed pid %d", f.NewPID, p.running(), pid)
	}
	f.Did = fmt.Sprintf("postgres pid %d killed with its processes, pid %d recovered its data", pid, f.NewPID)
	return nil
}
