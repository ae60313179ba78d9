package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// A platform behaves as Cloud Controller does towards the gateway: it
// provisions, updates, binds, unbinds and deprovisions, polls until a
// terminal state, retries deletions that did not end, and after a 5xx or
// no answer to a provision or bind sends its own orphan-mitigation DELETE
// until it ends (the seed table of cloud-controller-orphan-mitigation.md).
// What it was told is the first of the checker's three views.
type platform struct {
	n        int
	seed     uint64
	tenant   string
	c        *caller
	cl       *cluster
	h        *history
	brokers  []*brokerProc
	draining atomic.Bool
	// giveUp, once set, is when the platform stops retrying what does not
	// end (a deletion refused again and again): the checker then sees
	// what is left.
	giveUp atomic.Pointer[time.Time]
	// style is how it treats a create whose outcome it did not learn:
	// "" as Cloud Controller (its own orphan-mitigation DELETE), or one of
	// the platforms that do not mitigate, which leave the cleaning to the
	// gateway's own orphan mitigation: styleGivesUp forgets it, never
	// retrying nor deleting it; styleCrashes also drops the connection in
	// the middle of half its provisions and binds (an RST) and forgets
	// the call.
	style string

	mu    sync.Mutex
	inst  map[string]*pinst
	seq   int
	modes []string // modes for the next mutating calls (the nemesis's client faults)
}

// pinst is what the platform knows of one instance.
type pinst struct {
	id, broker, plan string
	live             bool // a success reached the platform and no deletion since
	busy             bool // an instance-level operation of this platform is in flight
	deleteFailed     bool // a deprovision got no final answer: it must be tried again
	bindings         map[string]*pbind
	nbind            int
}

type pbind struct {
	live, busy, unbindFailed bool
}

// Platforms that do not mitigate orphans (platform.style).
const (
	styleGivesUp = "gives-up"
	styleCrashes = "crashes"
)

const (
	maxInstances = 5
	pollEvery    = 400 * time.Millisecond
	pollGiveUp   = 2 * time.Minute // well under the async plan's maximum_polling_duration
)

// run runs one worker of the platform until it drains.
func (p *platform) run(worker int) {
	rng := rand.New(rand.NewPCG(p.seed, uint64(p.n*16+worker)))
	for !p.draining.Load() {
		p.step(rng)
		time.Sleep(time.Duration(rng.Int64N(int64(150 * time.Millisecond))))
	}
	// Drain: what this worker left unfinished is finished.
	for !p.gaveUp() && p.retryFailed(rng) {
	}
}

// nextMode is the mode of the next mutating call: a client fault the
// nemesis queued, or normal.
func (p *platform) nextMode() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.modes) == 0 {
		return modeNormal
	}
	m := p.modes[0]
	p.modes = p.modes[1:]
	return m
}

func (p *platform) queueModes(m string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range n {
		p.modes = append(p.modes, m)
	}
}

// step does one thing a user of the platform would.
func (p *platform) step(rng *rand.Rand) {
	if p.retryFailed(rng) {
		return
	}
	r := rng.Float64()
	p.mu.Lock()
	n := len(p.inst)
	p.mu.Unlock()
	switch {
	case n < maxInstances && r < 0.3:
		p.provision(rng)
	case r < 0.45:
		p.bind(rng)
	case r < 0.55:
		p.unbind(rng)
	case r < 0.65:
		p.update(rng)
	case r < 0.72:
		p.deprovision(rng)
	default:
		p.read(rng)
	}
}

// send makes one call and records it.
func (p *platform) send(rng *rand.Rand, o *op, method, path string, body any) answer {
	var raw []byte
	if body != nil {
		raw, _ = json.Marshal(body)
	}
	if o.mutating() && o.Why == "" {
		o.Mode = p.nextMode()
		if p.style == styleCrashes && (o.Kind == "provision" || o.Kind == "bind") && rng.IntN(2) == 0 {
			o.Mode, o.Why = modeHangUp, "crash"
		}
	}
	o.Platform, o.Tenant = p.n, p.tenant
	full := "/" + p.tenant + "/" + o.Broker + "/v2" + path
	var a answer
	deadline := time.Now().Add(90 * time.Second)
	for {
		o.Replica = p.cl.pick(rng)
		o.Start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), p.c.timeout)
		a = p.c.do(ctx, p.cl.platformAddr(o.Replica), o.Mode, method, full, raw, rng)
		cancel()
		if a.sent || a.status != 0 || time.Now().After(deadline) {
			break
		}
		// Nothing reached a gateway (it is down): another replica, or
		// this one once it is back, as a load balancer would.
		time.Sleep(100 * time.Millisecond)
	}
	o.End = time.Now()
	o.Status = a.status
	if a.err != nil {
		o.Err = a.err.Error()
	}
	if a.status >= 300 {
		o.Desc = a.desc()
	}
	p.h.add(o)
	return a
}

func ids(in *pinst) url.Values {
	plan := samplebroker.PlanSyncID
	if in.plan == "async" {
		plan = samplebroker.PlanAsyncID
	}
	return url.Values{"service_id": {samplebroker.ServiceID}, "plan_id": {plan}}
}

func planID(name string) string {
	if name == "async" {
		return samplebroker.PlanAsyncID
	}
	return samplebroker.PlanSyncID
}

// pickInstance returns a random instance that ok accepts; p.mu is held.
func (p *platform) pickInstance(rng *rand.Rand, ok func(*pinst) bool) *pinst {
	var c []*pinst
	for _, in := range p.inst {
		if ok(in) {
			c = append(c, in)
		}
	}
	if len(c) == 0 {
		return nil
	}
	sortInst(c)
	return c[rng.IntN(len(c))]
}

func (p *platform) read(rng *rand.Rand) {
	p.mu.Lock()
	in := p.pickInstance(rng, func(in *pinst) bool { return in.live })
	var bid string
	if in != nil {
		for id, bd := range in.bindings {
			if bd.live {
				bid = id
				break
			}
		}
	}
	p.mu.Unlock()
	switch {
	case in == nil || rng.IntN(4) == 0:
		b := p.brokers[rng.IntN(len(p.brokers))]
		p.send(rng, &op{Broker: b.name, Kind: "catalog"}, http.MethodGet, "/catalog", nil)
	case bid != "" && rng.IntN(2) == 0:
		p.send(rng, &op{Broker: in.broker, Kind: "get-binding", Instance: in.id, Binding: bid}, http.MethodGet,
			"/service_instances/"+in.id+"/service_bindings/"+bid+"?"+ids(in).Encode(), nil)
	default:
		p.send(rng, &op{Broker: in.broker, Kind: "get", Instance: in.id}, http.MethodGet,
			"/service_instances/"+in.id+"?"+ids(in).Encode(), nil)
	}
}

// holds is what the platform holds now: instance ids and
// "instance/binding", each with its broker.
func (p *platform) holds() (instances, bindings map[string]string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	instances, bindings = map[string]string{}, map[string]string{}
	for _, in := range p.inst {
		if in.live {
			instances[in.id] = in.broker
		}
		for id, bd := range in.bindings {
			if bd.live {
				bindings[in.id+"/"+id] = in.broker
			}
		}
	}
	return instances, bindings
}
