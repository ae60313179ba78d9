package main

// A platform's binding calls: bind and unbind, and what the platform then
// knows of the binding.

import (
	"fmt"
	"math/rand/v2"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

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
