package main

// Until an operation ends, as Cloud Controller sees it through: polling
// the last operation, deletions, the platform's own orphan mitigation, and
// the retries of deletions that got no final answer.

import (
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"time"
)

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
// mitigation. The platform then holds nothing of it. A platform that does
// not mitigate (style) forgets it at once.
func (p *platform) mitigate(rng *rand.Rand, in *pinst, binding string) {
	for attempt := 0; p.style == ""; attempt++ {
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
