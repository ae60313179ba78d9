package main

// A platform's instance calls: provision, update and deprovision, and what
// the platform then knows of the instance.

import (
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

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
