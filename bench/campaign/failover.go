package main

// The store-failover nemesis (-store-failover): the shared store runs as a
// primary and a replica, and a fault kills the primary so that the replica
// is promoted, then brings the old primary back as the new replica. With
// Redis the replica lags on purpose first (its replication link stalls),
// so that what the gateway keeps through a failover is what
// state.redis.replica_acks makes it wait for; with PostgreSQL the standby
// is synchronous. failover_redis.go and failover_pg.go run each store.

import (
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"time"
)

// fStoreFailover kills the store's primary (kill -9, PID-verified), has
// the replica promoted, and restarts the old primary as the new replica.
const fStoreFailover = "store-failover"

// storeOpts are the store's settings of a run beyond its kind.
type storeOpts struct {
	failover bool          // a primary and a replica, and failover faults
	every    time.Duration // the mean time between two failovers
	acks     int           // state.redis.replica_acks
}

// check refuses settings that cannot work: acknowledgements need
// replicas, which only -store-failover starts.
func (s storeOpts) check(store string) error {
	switch {
	case s.failover && store != "redis" && store != "postgres":
		return fmt.Errorf("-store-failover needs -store redis or postgres, not %s", store)
	case s.acks < 0:
		return fmt.Errorf("-replica-acks %d: want 0 or more", s.acks)
	case s.acks > 0 && (store != "redis" || !s.failover):
		return fmt.Errorf("-replica-acks %d needs -store redis -store-failover (a replica to acknowledge)", s.acks)
	case s.failover && s.every <= 0:
		return fmt.Errorf("-failover-every %s: want a positive duration", s.every)
	}
	return nil
}

// storeFailover is the store of -store-failover: its processes, the
// failover fault, and the pause fault on whichever server is the primary.
// Every fault on it runs alone (failover, pause and any other fault that
// takes the servers' faultMu).
type storeFailover interface {
	failover(f *fault) error
	pause(f *fault) error
	stop()
}

// withFailovers adds to schedule the failovers of -store-failover: one
// every st.every on average (between 0.75 and 1.25 of it), the first at
// +15 s, drawn from a source of their own, so that the rest of the
// schedule is the seed's as without them. The faults are renumbered in
// time order. Without -store-failover the schedule is returned as it is.
func withFailovers(schedule []*fault, seed uint64, d time.Duration, store string, st storeOpts) []*fault {
	if !st.failover {
		return schedule
	}
	rng := rand.New(rand.NewPCG(seed, 0xfa11))
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	out := append([]*fault(nil), schedule...)
	for at := 15 * time.Second; at < d; at += dur(st.every*3/4, st.every*5/4) {
		f := &fault{At: at, Kind: fStoreFailover, Target: store, For: dur(200*time.Millisecond, 2*time.Second)}
		if store == "redis" {
			// How long the replica's link stalls before the kill: the
			// writes of that time are on the primary alone.
			f.Latency = dur(500*time.Millisecond, 2500*time.Millisecond)
			f.Detail = fmt.Sprintf("replica lagging %s", f.Latency.Round(time.Millisecond))
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b *fault) int { return int(a.At - b.At) })
	for i, f := range out {
		f.N = i + 1
	}
	return out
}

// front is the address a store server is known by (to Sentinel, to the
// other server replicating from it, to the gateways): a listener that
// passes each connection to the server through the link that route picks
// by the connection's source address, so that one server's traffic can be
// faulted by kind (the gateways', the replication's) rather than all at
// once, and the gateways' traffic to either server goes through one link.
type front struct {
	ln     net.Listener
	target string
	route  func(src net.IP) *link
}

func newFront(target string, route func(src net.IP) *link) (*front, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fr := &front{ln: ln, target: target, route: route}
	go fr.serve()
	return fr, nil
}

// Addr is where clients connect.
func (fr *front) Addr() string { return fr.ln.Addr().String() }

func (fr *front) Close() { _ = fr.ln.Close() }

func (fr *front) serve() {
	for {
		c, err := fr.ln.Accept()
		if err != nil {
			return
		}
		var ip net.IP
		if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			ip = a.IP
		}
		go handleVia(fr.route(ip), c, fr.target)
	}
}

// Source addresses that tell a store server's clients apart at its front
// (loopback addresses all; redis-server's bind-source-addr picks them).
var (
	replicationSource = net.IPv4(127, 0, 0, 2) // the replica's connection to its primary
	sentinelSource    = net.IPv4(127, 0, 0, 3) // Sentinel's connections
)

// handleVia passes the connection c to target through l's faults; l's
// cut resets it (link.handle, and a front that picks l by source).
func handleVia(l *link, c net.Conn, target string) {
	l.mu.Lock()
	refusing := l.refusing || l.closed
	l.mu.Unlock()
	if refusing {
		reset(c)
		return
	}
	up, err := net.DialTimeout("tcp", target, 5*time.Second)
	if err != nil {
		reset(c)
		return
	}
	lc := &linkConn{a: c, b: up}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		reset(c)
		reset(up)
		return
	}
	l.conns[lc] = struct{}{}
	l.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); l.pipe(up, c) }()
	go func() { defer wg.Done(); l.pipe(c, up) }()
	wg.Wait()
	l.mu.Lock()
	delete(l.conns, lc)
	l.mu.Unlock()
}

// lockServers takes the fault locks of the store's servers, in a fixed
// order, and returns what releases them.
func lockServers(ps ...*proc) func() {
	for _, p := range ps {
		p.faultMu.Lock()
	}
	return func() {
		for _, p := range slices.Backward(ps) {
			p.faultMu.Unlock()
		}
	}
}

// waitFor polls ok every 100 ms until it is true or within has passed.
func waitFor(what string, within time.Duration, ok func() bool) error {
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s", what, within)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

// replicaAckTimeout is the gateways' state.redis.replica_ack_timeout with
// -replica-acks: above the replica's lag on a busy machine, below the
// broker's timeout.
const replicaAckTimeout = time.Second

// startFailover starts the store of -store-failover and returns the
// gateways' state section for it.
func (c *cluster) startFailover(dir string, st storeOpts) (string, error) {
	switch c.store {
	case "redis":
		r, err := startRedisFailover(c, dir)
		if r != nil {
			c.failover = r
		}
		if err != nil {
			return "", err
		}
		return failoverState(c.store, r.sentinel.addr, st.acks), nil
	case "postgres":
		p, err := startPgFailover(c, dir)
		if p != nil {
			c.failover = p
		}
		if err != nil {
			return "", err
		}
		return failoverState(c.store, p.url(), 0), nil
	}
	return "", fmt.Errorf("-store-failover needs -store redis or postgres, not %s", c.store)
}

// failoverState is the gateways' state section of -store-failover: with
// Redis, at addr the Sentinel that names the primary, and acks replica
// acknowledgements; with PostgreSQL, addr is the URL naming both servers.
func failoverState(store, addr string, acks int) string {
	tail := "operation_deadline: 2m, sweep_interval: 1s, reconcile: {after: 5s, every: 5s}}"
	if store == "postgres" {
		return fmt.Sprintf("{backend: postgres, postgres: {url: %q}, %s", addr, tail)
	}
	redis := fmt.Sprintf("addrs: [%q], master_name: %s", addr, sentinelMaster)
	if acks > 0 {
		redis += fmt.Sprintf(", replica_acks: %d, replica_ack_timeout: %s", acks, replicaAckTimeout)
	}
	return fmt.Sprintf("{backend: redis, redis: {%s}, %s", redis, tail)
}

// flags are the command line's flags for st (for a rerun's hint).
func (s storeOpts) flags() string {
	if !s.failover {
		return ""
	}
	out := fmt.Sprintf(" -store-failover -failover-every %s", s.every)
	if s.acks > 0 {
		out += fmt.Sprintf(" -replica-acks %d", s.acks)
	}
	return out
}

// doFailover carries out a fault of -store-failover's store: the failover
// itself, or a pause of whichever server is the primary (true: f was
// one of them).
func (n *nemesis) doFailover(f *fault) (bool, error) {
	fo := n.c.failover
	if fo == nil {
		return false, nil
	}
	switch f.Kind {
	case fStoreFailover:
		return true, fo.failover(f)
	case fRedisPause, fPgPause:
		return true, fo.pause(f)
	}
	return false, nil
}
