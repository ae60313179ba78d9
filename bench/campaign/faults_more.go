package main

// The faults a real deployment has beyond kills, pauses and bad links: a
// Redis without persistence restarting empty, one replica cut off from
// the store, a replica's wall clock stepping, a full disk under bolt, and
// the operator's own hand (SIGTERM rolling restarts, reloads). They are
// drawn from a stream of the seed of their own, so that the schedule of
// the other kinds stays what it was for every seed (docs/faults.md).

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/clockjump"
)

// More fault kinds.
const (
	fRedisRestart = "redis-restart"   // kill -9 Redis, start it again empty after For (no RDB, no AOF)
	fStoreCut     = "store-partition" // one replica's own link to the store resets and refuses, for For
	fClockJump    = "clock-jump"      // one replica's wall clock steps by Offset, and back after For
	fDiskFull     = "disk-full"       // the bolt file cannot grow (RLIMIT_FSIZE of the gateway), for For
	fRolling      = "rolling-restart" // SIGTERM every replica in turn, its drain, its start
	fReload       = "reload"          // one replica reloads its configuration (Detail: sighup, admin or file)
)

// baseTags are the gateway's build tags in every campaign: its wall clock
// can be stepped (internal/clockjump).
const baseTags = clockjump.Tag

// gatewayTags are the build tags of the gateway a campaign runs, with the
// mutation's (if any).
func gatewayTags(mutation string) string {
	if t := tagOf(mutation); t != "" {
		return baseTags + "," + t
	}
	return baseTags
}

// moreKinds are the kinds of this file that apply to a store and a number
// of replicas, with their weights.
func moreKinds(store string, replicas int) []kindWeight {
	ks := []kindWeight{{fClockJump, 3}, {fRolling, 2}, {fReload, 3}}
	switch store {
	case "bolt":
		ks = append(ks, kindWeight{fDiskFull, 3})
	case "redis":
		ks = append(ks, kindWeight{fRedisRestart, 1})
	}
	if store != "bolt" && replicas >= 2 {
		ks = append(ks, kindWeight{fStoreCut, 3})
	}
	return ks
}

type kindWeight struct {
	name   string
	weight int
}

// planAll is plan's schedule with the kinds of this file among it,
// numbered again in order.
func planAll(seed uint64, d time.Duration, store string, replicas, platforms int, brokers []string, every time.Duration) []*fault {
	out := append(plan(seed, d, store, replicas, platforms, brokers, every), planMore(seed, d, store, replicas, every)...)
	slices.SortStableFunc(out, func(a, b *fault) int { return cmp.Compare(a.At, b.At) })
	for i, f := range out {
		f.N = i + 1
	}
	return out
}

// skipKinds is schedule without the faults of the kinds in skip
// (comma-separated), numbered again.
func skipKinds(schedule []*fault, skip string) []*fault {
	if skip == "" {
		return schedule
	}
	kinds := strings.Split(skip, ",")
	out := slices.DeleteFunc(schedule, func(f *fault) bool { return slices.Contains(kinds, f.Kind) })
	for i, f := range out {
		f.N = i + 1
	}
	return out
}

// planMore draws the faults of this file: one every 2.4 to 9.6 times
// every (15 s on average at the default 2.5 s) from +5 s, at most one
// Redis restart a run (it forgets everything: what it excuses, it
// excuses for everything that came before it).
func planMore(seed uint64, d time.Duration, store string, replicas int, every time.Duration) []*fault {
	rng := rand.New(rand.NewPCG(seed, 0xfa018))
	kinds := moreKinds(store, replicas)
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	gw := func() string { return fmt.Sprintf("gw%d", rng.IntN(replicas)) }
	var out []*fault
	restarted := false
	for at := 5 * time.Second; ; {
		at += dur(every*12/5, every*48/5)
		if at >= d {
			return out
		}
		w, k := rng.IntN(total), ""
		for _, c := range kinds {
			if w < c.weight {
				k = c.name
				break
			}
			w -= c.weight
		}
		f := &fault{At: at, Kind: k}
		switch k {
		case fRedisRestart:
			if restarted {
				continue
			}
			restarted = true
			f.Target, f.For, f.Detail = store, dur(200*time.Millisecond, 2*time.Second), "empty"
		case fStoreCut:
			f.Target, f.For = gw(), dur(time.Second, 8*time.Second)
			f.Detail = "from " + store
		case fClockJump:
			f.Target, f.For = gw(), dur(5*time.Second, 30*time.Second)
			f.Offset = dur(30*time.Second, 10*time.Minute).Round(time.Second)
			if rng.IntN(2) == 0 {
				f.Offset = -f.Offset
			}
			f.Detail = fmt.Sprintf("%+v", f.Offset)
		case fDiskFull:
			f.Target, f.For = store, dur(2*time.Second, 10*time.Second)
			f.Detail = []string{diskGrowth, diskWrites}[rng.IntN(2)]
		case fRolling:
			f.Target = "all"
		case fReload:
			f.Target, f.Detail = gw(), []string{"sighup", "admin", "file"}[rng.IntN(3)]
		}
		out = append(out, f)
	}
}

// doMore carries out a fault of this file.
func (n *nemesis) doMore(f *fault) error {
	switch f.Kind {
	case fRedisRestart:
		return n.restartRedisEmpty(f)
	case fStoreCut:
		l := n.gateway(f.Target).storeLink
		f.Start = time.Now()
		l.cut(true)
		time.Sleep(f.For)
		l.heal()
		return nil
	case fClockJump:
		return n.jumpClock(f)
	case fDiskFull:
		return n.fillDisk(f)
	case fRolling:
		return n.rollingRestart(f)
	case fReload:
		return n.reload(f)
	}
	return fmt.Errorf("unknown fault kind %q", f.Kind)
}

func (n *nemesis) gateway(name string) *gatewayProc {
	for _, g := range n.c.gateways {
		if g.name == name {
			return g
		}
	}
	return nil
}

// ownLinks gives g a link of its own to the store (in front of the shared
// one, which the store-wide faults degrade) and a clock file, and returns
// the state section with g's link in place of the shared one.
func (c *cluster) ownLinks(g *gatewayProc, state string) (string, error) {
	g.clockFile = g.config + ".clock"
	g.env = []string{clockjump.EnvFile + "=" + g.clockFile}
	if c.storeLink == nil {
		return state, nil
	}
	var err error
	if g.storeLink, err = newLink("link of "+g.name+" to "+c.store, c.storeLink.Addr()); err != nil {
		return "", err
	}
	return strings.ReplaceAll(state, c.storeLink.Addr(), g.storeLink.Addr()), nil
}
