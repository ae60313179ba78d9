package main

import (
	"context"
	"encoding/json"
	"fmt"
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

func (p *platform) provision(rng *rand.Rand) {
	b := p.brokers[rng.IntN(len(p.brokers))]
	plan := "sync"
	if rng.IntN(2) == 0 {
		plan = "async"
	}
	p.mu.Lock()
	p.seq++
	in := &pinst{id: fmt.Sprintf("s%d-p%d-i%d", p.seed, p.n, p.seq), broker: b.name, plan: plan, busy: true, bindings: map[string]*pbind{}}
	p.inst[in.id] = in
	p.mu.Unlock()

	body := map[string]any{
		"service_id": samplebroker.ServiceID, "plan_id": planID(plan),
		"organization_guid": "org-" + p.tenant, "space_guid": "space-" + p.tenant,
		"context": map[string]any{"platform": "cloudfoundry", "organization_guid": "org-" + p.tenant, "space_guid": "space-" + p.tenant},
	}
	if plan == "sync" {
		body["parameters"] = map[string]any{"size": "small"}
	}
	o := &op{Broker: b.name, Kind: "provision", Instance: in.id}
	a := p.send(rng, o, http.MethodPut, "/service_instances/"+in.id+"?accepts_incomplete=true", body)
	switch {
	case (a.status == 200 || a.status == 201) && a.object():
		p.settle(in, true)
	case a.status == 202 && a.object():
		switch p.poll(rng, in, "", o, operationOf(a)) {
		case "succeeded":
			p.settle(in, true)
		case "failed", "gone":
			p.forget(in)
		default: // gave up polling: the user deletes it
			p.mitigate(rng, in, "")
		}
	case a.status >= 500, a.status >= 200 && a.status < 300, a.status == 0 && a.sent:
		p.mitigate(rng, in, "")
	default: // a 4xx, or it never reached a gateway
		p.forget(in)
	}
}

func (p *platform) settle(in *pinst, live bool) {
	p.mu.Lock()
	in.live, in.busy = live, false
	p.mu.Unlock()
}

func (p *platform) forget(in *pinst) {
	p.mu.Lock()
	delete(p.inst, in.id)
	p.mu.Unlock()
}

func operationOf(a answer) string {
	var v struct {
		Operation string `json:"operation"`
	}
	_ = json.Unmarshal(a.body, &v)
	return v.Operation
}

// poll polls the instance's (or binding's) last operation until it ends:
// "succeeded", "failed", "gone" (410), or "" when the platform gave up.
func (p *platform) poll(rng *rand.Rand, in *pinst, binding string, of *op, operation string) string {
	q := ids(in)
	if operation != "" {
		q.Set("operation", operation)
	}
	path := "/service_instances/" + in.id + "/last_operation?" + q.Encode()
	kind := "poll"
	if binding != "" {
		path = "/service_instances/" + in.id + "/service_bindings/" + binding + "/last_operation?" + q.Encode()
		kind = "poll-binding"
	}
	give := time.Now().Add(pollGiveUp)
	for time.Now().Before(give) {
		time.Sleep(pollEvery)
		o := &op{Broker: in.broker, Kind: kind, Instance: in.id, Binding: binding, Of: of.ID}
		a := p.send(rng, o, http.MethodGet, path, nil)
		switch a.status {
		case 200:
			var v struct{ State string }
			_ = json.Unmarshal(a.body, &v)
			o.State = v.State
			if v.State == "succeeded" || v.State == "failed" {
				return v.State
			}
		case 410:
			return "gone"
		}
	}
	return ""
}

// mitigate deletes an instance (binding == "") or binding whose creation
// got no clear answer, until the deletion ends: the platform's orphan
// mitigation. The platform then holds nothing of it.
func (p *platform) mitigate(rng *rand.Rand, in *pinst, binding string) {
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			time.Sleep(backoff(attempt))
		}
		if p.delete(rng, in, binding, "orphan-mitigation") || p.gaveUp() {
			break
		}
	}
	p.mu.Lock()
	if binding == "" {
		delete(p.inst, in.id)
	} else {
		delete(in.bindings, binding)
	}
	p.mu.Unlock()
}

// gaveUp reports whether the platform stopped retrying.
func (p *platform) gaveUp() bool {
	t := p.giveUp.Load()
	return t != nil && time.Now().After(*t)
}

func backoff(attempt int) time.Duration {
	d := time.Duration(attempt) * 500 * time.Millisecond
	return min(d, 5*time.Second)
}

// delete sends one deprovision or unbind (and polls it); true when the
// platform may forget what it deleted (200, 410, or a poll that said
// succeeded or 410).
func (p *platform) delete(rng *rand.Rand, in *pinst, binding, why string) bool {
	q := ids(in)
	q.Set("accepts_incomplete", "true")
	path := "/service_instances/" + in.id + "?" + q.Encode()
	kind := "deprovision"
	if binding != "" {
		path = "/service_instances/" + in.id + "/service_bindings/" + binding + "?" + q.Encode()
		kind = "unbind"
	}
	o := &op{Broker: in.broker, Kind: kind, Instance: in.id, Binding: binding, Why: why}
	a := p.send(rng, o, http.MethodDelete, path, nil)
	switch {
	case a.status == 200 || a.status == 410:
		return true
	case a.status == 202 && a.object(): // a 202 Cloud Controller cannot parse fails the deletion
		switch p.poll(rng, in, binding, o, operationOf(a)) {
		case "succeeded", "gone":
			return true
		}
	}
	return false
}

func (p *platform) bind(rng *rand.Rand) {
	p.mu.Lock()
	in := p.pickInstance(rng, func(in *pinst) bool { return in.live && !in.busy && !in.deleteFailed })
	if in == nil {
		p.mu.Unlock()
		return
	}
	in.nbind++
	id := fmt.Sprintf("b%d", in.nbind)
	bd := &pbind{busy: true}
	in.bindings[id] = bd
	p.mu.Unlock()
	body := map[string]any{
		"service_id": samplebroker.ServiceID, "plan_id": planID(in.plan),
		"bind_resource": map[string]any{"app_guid": "app-" + id},
		"context":       map[string]any{"platform": "cloudfoundry", "organization_guid": "org-" + p.tenant, "space_guid": "space-" + p.tenant},
	}
	o := &op{Broker: in.broker, Kind: "bind", Instance: in.id, Binding: id}
	a := p.send(rng, o, http.MethodPut, "/service_instances/"+in.id+"/service_bindings/"+id+"?accepts_incomplete=true", body)
	switch {
	case (a.status == 200 || a.status == 201) && a.object():
		p.settleBinding(bd, true)
	case a.status == 202 && a.object():
		switch p.poll(rng, in, id, o, operationOf(a)) {
		case "succeeded":
			p.settleBinding(bd, true)
		case "failed", "gone":
			p.dropBinding(in, id)
		default:
			p.mitigate(rng, in, id)
		}
	case a.status >= 500, a.status >= 200 && a.status < 300, a.status == 0 && a.sent:
		p.mitigate(rng, in, id)
	default:
		p.dropBinding(in, id)
	}
}

func (p *platform) settleBinding(bd *pbind, live bool) {
	p.mu.Lock()
	bd.live, bd.busy = live, false
	p.mu.Unlock()
}

func (p *platform) dropBinding(in *pinst, id string) {
	p.mu.Lock()
	delete(in.bindings, id)
	p.mu.Unlock()
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

func (p *platform) unbind(rng *rand.Rand) {
	p.mu.Lock()
	in := p.pickInstance(rng, func(in *pinst) bool { return in.live && !in.busy && liveBinding(in) != "" })
	var id string
	if in != nil {
		id = liveBinding(in)
		in.bindings[id].busy = true
	}
	p.mu.Unlock()
	if in != nil {
		p.unbindOne(rng, in, id)
	}
}

// unbindOne unbinds a binding the caller marked busy; true when it is gone.
func (p *platform) unbindOne(rng *rand.Rand, in *pinst, id string) bool {
	ok := p.delete(rng, in, id, "")
	p.mu.Lock()
	defer p.mu.Unlock()
	bd := in.bindings[id]
	bd.busy = false
	if ok {
		delete(in.bindings, id)
		return true
	}
	bd.unbindFailed = true
	return false
}

// liveBinding is a live binding of in that nothing is doing anything to,
// the lowest id first; p.mu is held.
func liveBinding(in *pinst) string {
	best := ""
	for id, bd := range in.bindings {
		if bd.live && !bd.busy && (best == "" || id < best) {
			best = id
		}
	}
	return best
}

func (p *platform) update(rng *rand.Rand) {
	p.mu.Lock()
	racer := rng.IntN(20) == 0 // now and then, a second request races one in flight
	in := p.pickInstance(rng, func(in *pinst) bool { return in.live && (!in.busy || racer) && !in.deleteFailed })
	if in == nil {
		p.mu.Unlock()
		return
	}
	mine := !in.busy
	in.busy = true
	p.mu.Unlock()
	body := map[string]any{"service_id": samplebroker.ServiceID, "plan_id": planID(in.plan)}
	if in.plan == "sync" {
		body["parameters"] = map[string]any{"size": []string{"small", "medium", "large"}[rng.IntN(3)]}
	} else {
		body["parameters"] = map[string]any{"n": rng.IntN(100)}
	}
	o := &op{Broker: in.broker, Kind: "update", Instance: in.id}
	if !mine {
		o.Why = "race"
	}
	a := p.send(rng, o, http.MethodPatch, "/service_instances/"+in.id+"?accepts_incomplete=true", body)
	if a.status == 202 && a.object() {
		p.poll(rng, in, "", o, operationOf(a))
	}
	if mine {
		p.mu.Lock()
		in.busy = false
		p.mu.Unlock()
	}
}

func (p *platform) deprovision(rng *rand.Rand) {
	p.mu.Lock()
	in := p.pickInstance(rng, func(in *pinst) bool {
		if !in.live || in.busy {
			return false
		}
		for _, bd := range in.bindings {
			if bd.busy {
				return false
			}
		}
		return true
	})
	if in == nil {
		p.mu.Unlock()
		return
	}
	in.busy = true
	var bs []string
	for id, bd := range in.bindings {
		bd.busy = true
		bs = append(bs, id)
	}
	p.mu.Unlock()
	for _, id := range sortedStrings(bs) {
		if !p.unbindOne(rng, in, id) {
			// Cloud Controller does not delete an instance that still has
			// bindings: the rest stay as they were.
			p.mu.Lock()
			for _, bd := range in.bindings {
				bd.busy = false
			}
			in.busy = false
			p.mu.Unlock()
			return
		}
	}
	p.deprovisionNow(rng, in)
}

// deprovisionNow deletes in (marked busy, without bindings).
func (p *platform) deprovisionNow(rng *rand.Rand, in *pinst) {
	if p.delete(rng, in, "", "") {
		p.forget(in)
		return
	}
	p.mu.Lock()
	in.busy = false
	in.deleteFailed = true
	p.mu.Unlock()
}

// retryFailed tries again one deletion that got no final answer; false
// when there is none.
func (p *platform) retryFailed(rng *rand.Rand) bool {
	p.mu.Lock()
	var target *pinst
	var binding string
	for _, in := range sortedInst(p.inst) {
		if in.busy {
			continue
		}
		for id, bd := range in.bindings {
			if bd.unbindFailed && !bd.busy {
				target, binding = in, id
				bd.busy = true
				break
			}
		}
		if target != nil {
			break
		}
		if in.deleteFailed && len(in.bindings) == 0 {
			target = in
			in.busy = true
			break
		}
	}
	p.mu.Unlock()
	if target == nil {
		return false
	}
	time.Sleep(300 * time.Millisecond)
	if binding != "" {
		if p.delete(rng, target, binding, "retry") {
			p.mu.Lock()
			delete(target.bindings, binding)
			p.mu.Unlock()
		} else {
			p.mu.Lock()
			target.bindings[binding].busy = false
			p.mu.Unlock()
		}
		return true
	}
	if p.delete(rng, target, "", "retry") {
		p.forget(target)
	} else {
		p.mu.Lock()
		target.busy = false
		p.mu.Unlock()
	}
	return true
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
