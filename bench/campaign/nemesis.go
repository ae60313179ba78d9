package main

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// A fault is one thing the nemesis does: planned from the seed (At, Kind,
// Target, For, Params), then carried out (Start, End: when it began and
// when everything it did was healed again).
type fault struct {
	N        int           `json:"n"`
	At       time.Duration `json:"at"` // from the start of the run
	Kind     string        `json:"kind"`
	Target   string        `json:"target"` // gw0, modern, legacy, redis, postgres, p3
	For      time.Duration `json:"for"`
	Detail   string        `json:"detail,omitempty"`
	Endpoint string        `json:"endpoint,omitempty"` // a broker fault's
	Latency  time.Duration `json:"latency,omitempty"`  // a broker's or link's delay
	// set while it runs, as it really happened: Start and End of what it
	// did (a kill waits for an earlier kill-and-restart of its process to
	// end first), the process it killed and the one that replaced it,
	// when a broker fault fired (seen by the broker's count going down),
	// and why it did not happen as planned (Err: never an excuse).
	Start  time.Time   `json:"start"`
	End    time.Time   `json:"end"`
	PID    int         `json:"pid,omitempty"`
	NewPID int         `json:"new_pid,omitempty"`
	Fired  []time.Time `json:"fired,omitempty"`
	Err    string      `json:"err,omitempty"`
	// Offset is a clock-jump's step; Did says what a fault of
	// faults_more.go did, as it happened (PIDs, exit codes, triggers).
	Offset time.Duration `json:"offset,omitempty"`
	Did    string        `json:"did,omitempty"`

	status int
	count  int
}

func (f *fault) String() string {
	s := fmt.Sprintf("fault %d at +%s: %s %s", f.N, f.At.Round(time.Millisecond), f.Kind, f.Target)
	if f.Detail != "" {
		s += " " + f.Detail
	}
	if f.For > 0 {
		s += fmt.Sprintf(" for %s", f.For.Round(time.Millisecond))
	}
	if !f.Start.IsZero() {
		s += fmt.Sprintf(" [%s→%s]", f.Start.Format("15:04:05.000"), f.End.Format("15:04:05.000"))
	}
	if f.Err != "" {
		s += " (error: " + f.Err + ")"
	}
	return s
}

// Fault kinds.
const (
	fGatewayKill  = "gateway-kill9"    // kill -9 a replica; restart it after For
	fBrokerCrash  = "broker-kill9"     // kill -9 a broker (its state on disk); restart after For
	fRedisPause   = "redis-sigstop"    // SIGSTOP Redis; SIGCONT after For
	fPgPause      = "postgres-sigstop" // SIGSTOP the postmaster and every backend; SIGCONT after For
	fBrokerError  = "broker-error"     // the broker answers status to count calls of endpoint
	fBrokerSlow   = "broker-latency"   // the broker delays count calls of endpoint by latency
	fBrokerHang   = "broker-hang"      // the broker never answers count calls of endpoint
	fBrokerFailOp = "broker-fail-op"   // count async operations of endpoint end in "failed"
	fBrokerJunk   = "broker-garbage"   // the broker answers a body that is not JSON
	fLinkDelay    = "link-delay"       // every chunk through the link waits latency, for For
	fLinkStall    = "link-stall"       // nothing passes the link for For
	fLinkCut      = "link-reset"       // every connection through the link is reset; new ones for For
	fHalfClose    = "client-halfclose" // the platform's next count mutating calls half-close
	fHangUp       = "client-hangup"    // the platform's next count mutating calls hang up (RST)
)

// faultEndpoints are the broker endpoints the broker faults aim at.
var faultEndpoints = []string{"provision", "update", "deprovision", "bind", "unbind", "last_operation", "catalog"}

// plan draws the fault schedule of a run from its seed: a fault every 1-4
// seconds (every=2.5s on average) from +3s to the end of the run.
func plan(seed uint64, d time.Duration, store string, replicas, platforms int, brokers []string, every time.Duration) []*fault {
	rng := rand.New(rand.NewPCG(seed, 0xfa017))
	type kind struct {
		name   string
		weight int
	}
	kinds := []kind{{fGatewayKill, 3}, {fBrokerCrash, 3}, {fBrokerError, 3}, {fBrokerSlow, 3}, {fBrokerHang, 1},
		{fBrokerFailOp, 2}, {fBrokerJunk, 1}, {fLinkDelay, 2}, {fLinkStall, 2}, {fLinkCut, 2}, {fHalfClose, 2}, {fHangUp, 2}}
	shared := store == "redis" || store == "postgres" // a store process the nemesis can reach
	if shared {
		kinds = append(kinds, kind{storePause(store), 3})
	}
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	dur := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo))) }
	var out []*fault
	for at := 3 * time.Second; ; {
		at += dur(every*2/5, every*8/5)
		if at >= d {
			return out
		}
		w := rng.IntN(total)
		var k string
		for _, c := range kinds {
			if w < c.weight {
				k = c.name
				break
			}
			w -= c.weight
		}
		f := &fault{N: len(out) + 1, At: at, Kind: k}
		broker := brokers[rng.IntN(len(brokers))]
		switch k {
		case fGatewayKill:
			f.Target, f.For = fmt.Sprintf("gw%d", rng.IntN(replicas)), dur(200*time.Millisecond, 2*time.Second)
		case fBrokerCrash:
			f.Target, f.For = broker, dur(200*time.Millisecond, 3*time.Second)
		case fRedisPause, fPgPause:
			f.Target, f.For = store, dur(500*time.Millisecond, 4*time.Second)
		case fBrokerError, fBrokerSlow, fBrokerHang, fBrokerFailOp, fBrokerJunk:
			f.Target = broker
			f.Endpoint = faultEndpoints[rng.IntN(len(faultEndpoints))]
			f.count = 1 + rng.IntN(3)
			f.For = 10 * time.Second // then cleared, if not used up
			switch k {
			case fBrokerError:
				f.status = []int{500, 502, 503}[rng.IntN(3)]
				f.Detail = fmt.Sprintf("%s→%d ×%d", f.Endpoint, f.status, f.count)
			case fBrokerSlow:
				f.Latency = dur(500*time.Millisecond, 7*time.Second)
				f.Detail = fmt.Sprintf("%s +%s ×%d", f.Endpoint, f.Latency.Round(time.Millisecond), f.count)
			case fBrokerHang:
				f.count = 1
				f.Detail = f.Endpoint + " ×1"
			case fBrokerFailOp:
				f.Endpoint = []string{"provision", "update", "deprovision", "bind", "unbind"}[rng.IntN(5)]
				f.Detail = fmt.Sprintf("%s ×%d", f.Endpoint, f.count)
			case fBrokerJunk:
				f.count, f.status = 1, []int{200, 201, 202}[rng.IntN(3)]
				f.Detail = fmt.Sprintf("%s→%d garbage ×1", f.Endpoint, f.status)
			}
		case fLinkDelay, fLinkStall, fLinkCut:
			f.Target = broker
			if shared && rng.IntN(3) == 0 {
				f.Target = store
			}
			switch k {
			case fLinkDelay:
				f.Latency, f.For = dur(20*time.Millisecond, 400*time.Millisecond), dur(time.Second, 6*time.Second)
				f.Detail = fmt.Sprintf("+%s per chunk", f.Latency.Round(time.Millisecond))
			case fLinkStall:
				f.For = dur(300*time.Millisecond, 4*time.Second)
			case fLinkCut:
				f.For = dur(0, time.Second)
			}
		case fHalfClose, fHangUp:
			f.Target, f.count = fmt.Sprintf("p%d", rng.IntN(platforms)), 1+rng.IntN(2)
			f.Detail = fmt.Sprintf("×%d", f.count)
		}
		out = append(out, f)
	}
}

// storePause is the kind of fault that pauses store's server.
func storePause(store string) string {
	if store == "postgres" {
		return fPgPause
	}
	return fRedisPause
}

// nemesis carries out a schedule against the cluster and the platforms.
type nemesis struct {
	c         *cluster
	platforms []*platform
	h         *history
	logf      func(string, ...any)
	wg        sync.WaitGroup
}

// run carries out the schedule from t0 until it ends or stop closes, then
// waits until every fault has healed.
func (n *nemesis) run(t0 time.Time, schedule []*fault, stop <-chan struct{}) {
	for _, f := range schedule {
		select {
		case <-stop:
			n.wg.Wait()
			return
		case <-time.After(time.Until(t0.Add(f.At))):
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.do(f)
		}()
	}
	n.wg.Wait()
}

func (n *nemesis) broker(name string) *brokerProc {
	for _, b := range n.c.brokers {
		if b.name == name {
			return b
		}
	}
	return nil
}

func (n *nemesis) linkOf(target string) *link {
	if target == n.c.store {
		return n.c.storeLink
	}
	return n.broker(target).link
}

// do carries out one fault and heals it.
func (n *nemesis) do(f *fault) {
	f.Start = time.Now()
	var err error
	defer func() {
		f.End = time.Now()
		if err != nil {
			f.Err = err.Error()
		}
		n.h.addFault(f)
		n.logf("%s", f)
	}()
	if done, ferr := n.doFailover(f); done {
		err = ferr
		return
	}
	switch f.Kind {
	case fGatewayKill:
		var g *gatewayProc
		for _, x := range n.c.gateways {
			if x.name == f.Target {
				g = x
			}
		}
		err = killAndRestart(f, &g.proc, g.listen, g.start)
	case fBrokerCrash:
		b := n.broker(f.Target)
		err = killAndRestart(f, &b.proc, b.addr, b.start)
	case fRedisPause:
		if err = n.c.redis.signal(syscall.SIGSTOP); err == nil {
			time.Sleep(f.For)
			err = n.c.redis.signal(syscall.SIGCONT)
		}
	case fPgPause:
		n.c.postgres.faultMu.Lock() // not during a restart
		if err = n.c.postgres.pause(); err == nil {
			time.Sleep(f.For)
			err = n.c.postgres.resume()
		}
		n.c.postgres.faultMu.Unlock()
	case fPgRestart:
		err = n.restartPostgres(f) // pg_restart.go
	case fBrokerError, fBrokerSlow, fBrokerHang, fBrokerFailOp, fBrokerJunk:
		b := n.broker(f.Target)
		fj := map[string]any{"endpoint": f.Endpoint, "count": f.count}
		switch f.Kind {
		case fBrokerError:
			fj["status"] = f.status
		case fBrokerSlow:
			fj["latency"] = f.Latency.String()
		case fBrokerHang:
			fj["hang"] = true
		case fBrokerFailOp:
			fj["fail_operation"] = true
		case fBrokerJunk:
			fj["status"], fj["body"] = f.status, "<html>Bad Gateway</html>"
		}
		if _, err = b.control("PUT", "fault", fj); err != nil {
			break
		}
		f.Fired = watchFired(b, samplebroker.Fault{Endpoint: f.Endpoint, Status: asInt(fj["status"]), Body: asString(fj["body"]),
			Hang: f.Kind == fBrokerHang, Latency: f.Latency, FailOperation: f.Kind == fBrokerFailOp}, f.count, time.Now().Add(f.For))
		// What is left of it goes; a broker that crashed meanwhile lost it.
		_, _ = b.control("DELETE", "fault", nil)
	case fLinkDelay:
		l := n.linkOf(f.Target)
		l.setDelay(f.Latency)
		time.Sleep(f.For)
		l.setDelay(0)
	case fLinkStall:
		l := n.linkOf(f.Target)
		l.setStalled(true)
		time.Sleep(f.For)
		l.setStalled(false)
	case fLinkCut:
		l := n.linkOf(f.Target)
		l.cut(true)
		time.Sleep(f.For)
		l.heal()
	case fHalfClose, fHangUp:
		var p *platform
		for _, x := range n.platforms {
			if fmt.Sprintf("p%d", x.n) == f.Target {
				p = x
			}
		}
		mode := modeHalfClose
		if f.Kind == fHangUp {
			mode = modeHangUp
		}
		p.queueModes(mode, f.count)
	default:
		err = n.doMore(f) // faults_more.go
	}
}

func asInt(v any) int       { i, _ := v.(int); return i }
func asString(v any) string { s, _ := v.(string); return s }
