package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The checker compares three independent views after everything drained:
// what each platform was told (its holdings and its history), what the
// brokers hold and logged, and what the gateways' inventory, locks and
// orphan queue hold. Every break of the gateway's promises is a violation:
//
//	(a) an instance or binding a platform holds exists at its broker;
//	(b) an instance or binding at a broker is held by a platform, or the
//	    gateway's orphan queue names it: none remains untracked;
//	(c) no lock remains once nothing is in flight;
//	(d) no mutating call got a 5xx for a reason that was not the broker's
//	    (or the state store's, while it was faulted);
//	(e) a broker never saw two overlapping mutating calls for one instance
//	    that the gateway's locks forbid, nor a call during an asynchronous
//	    operation they forbid;
//	(f) no platform got a 2xx to a mutating call, or a "succeeded" poll,
//	    that the broker did not send, except the gateway's documented
//	    emulations (the async shim's 202);
//	(g) what platforms read is linearizable (linear.go);
//	(h) what each broker holds is what the inventory records
//	    (checker_inventory.go);
//	(i) no mutating call succeeded while Redis had lost the gateways'
//	    data, until the operator accepted the loss (checker_more.go).
//
// A fault excuses only as it really happened (fault.Start to End, a
// failed one never; a broker's injected fault only when it fired).

// violation is one broken promise.
type violation struct {
	Rule     string // a..h
	What     string
	Around   string    // the ops and faults near it
	At       time.Time // when it happened (zero: at the end)
	Instance string    // the instance it is about ("": none)
}

func (v violation) String() string {
	s := fmt.Sprintf("VIOLATION (%s) %s", v.Rule, v.What)
	if v.Around != "" {
		s += "\n" + strings.TrimRight(v.Around, "\n")
	}
	return s
}

// verdict is the checker: every violation of (a) to (i).
type verdict struct {
	store      string // bolt, redis or postgres: the target of the store's faults
	ops        []*op
	faults     []*fault
	held       map[string]string // platform-held instance or "instance/binding" -> broker
	brokers    map[string]*brokerView
	gw         *gatewayView
	shimmed    map[string]bool // brokers with the async shim (emulate.async_after)
	fetched    map[string]bool // brokers whose GETs the gateway answers (emulate.fetch)
	audit      []*seenLock     // every lock seen while the campaign ran
	careless   map[int]string  // platforms that do not mitigate orphans: gives-up or crashes
	idempotent map[string]bool // brokers whose repeats the gateway answers (emulate.idempotent)
	violations []violation
	notes      []string // what is wrong, but not the gateway's doing
}

func (v *verdict) add(rule, what, instance string, from, to time.Time) {
	v.violations = append(v.violations, violation{Rule: rule, What: what, Around: around(v.ops, v.faults, instance, from, to), At: from, Instance: instance})
}

func instanceOf(key string) string {
	id, _, _ := strings.Cut(key, "/")
	return id
}

func (v *verdict) check() {
	v.checkHoldings()
	v.checkLocks()
	v.checkLockAges()
	v.check5xx()
	v.checkOverlaps()
	v.checkInvented()
	v.checkReads()
	v.checkInventory()
	v.checkRefusedWhileLost() // checker_more.go
	v.excuseForgotten()
}

// lastOpOn is the time of the last op on an instance (for the report).
func (v *verdict) lastOpOn(instance string) time.Time {
	var t time.Time
	for _, o := range v.ops {
		if o.Instance == instance && o.End.After(t) {
			t = o.End
		}
	}
	return t
}

func (v *verdict) checkHoldings() {
	keys := make([]string, 0, len(v.held))
	for k := range v.held {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b := v.brokers[v.held[k]]
		at := b.instances[k]
		if strings.Contains(k, "/") {
			at = b.bindings[k]
		}
		if !at {
			t := v.lastOpOn(instanceOf(k))
			v.add("a", fmt.Sprintf("%s %s: a platform holds it, the broker does not", v.held[k], k), instanceOf(k), t, t)
		}
	}
	for _, name := range sortedKeys(v.brokers) {
		b := v.brokers[name]
		for _, set := range []map[string]bool{b.instances, b.bindings} {
			for _, k := range sortedKeys(set) {
				if _, ok := v.held[k]; ok || v.gw.orphans[name+" "+k] {
					continue
				}
				if o := v.abandoned(name, k); o != nil {
					// A platform that does not mitigate went away (or
					// gave up) before the answer, and the gateway
					// delivered it: the inventory names what it made.
					v.notes = append(v.notes, fmt.Sprintf("%s %s: its platform (%s) never learnt the outcome of %s, which the gateway delivered and recorded",
						name, k, v.careless[o.Platform], o))
					continue
				}
				if l := v.brokerLied(name, k); l != nil {
					// The broker said it deleted it (a 2xx to the
					// deletion, here an injected garbage answer) and did
					// not: the broker's broken promise, not the gateway's.
					v.notes = append(v.notes, fmt.Sprintf("%s %s: the broker answered %d to its %s at %s and still holds it (the broker's own fault)",
						name, k, l.Status, l.Endpoint, l.Start.Format("15:04:05.000")))
					continue
				}
				inv := "the inventory does not name it either"
				if v.gw.inventory[name+" "+k] {
					inv = "only the inventory names it"
				}
				t := v.lastOpOn(instanceOf(k))
				v.add("b", fmt.Sprintf("%s %s: at the broker, no platform holds it and the orphan queue does not name it (%s)", name, k, inv), instanceOf(k), t, t)
			}
		}
	}
}

// brokerLied is the broker's last deletion of k in its call log if it
// answered it 2xx although it still holds k (a fault made it answer
// without deleting), else nil.
func (v *verdict) brokerLied(broker, k string) *callLine {
	instance, binding, _ := strings.Cut(k, "/")
	var last *callLine
	calls := v.brokers[broker].calls
	for i := range calls {
		l := &calls[i]
		if l.InstanceID != instance || (binding != "" && l.BindingID != binding) || (binding == "" && l.BindingID != "") {
			continue
		}
		last = l
	}
	if last == nil || (last.Endpoint != "deprovision" && last.Endpoint != "unbind") || last.Status < 200 || last.Status >= 300 {
		return nil
	}
	for _, f := range v.faults {
		if f.Target == broker && f.Kind == fBrokerJunk && !f.Start.After(last.End) && !f.End.Before(last.Start) {
			return last
		}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func (v *verdict) checkLocks() {
	for _, l := range v.gw.locks {
		v.violations = append(v.violations, violation{Rule: "c", What: "a lock remains with nothing in flight: " + l})
	}
}

// Bounds of a lock's life (checkLockAges): a call's lock lives for the call
// (at most the broker's timeout) and, after a timeout, hold_after_timeout;
// an async operation's until a poll (the platform's every 400 ms, or the
// gateway's own after state.reconcile.after) sees it end.
const (
	syncLockBound = brokerTimeout + holdAfter + 10*time.Second
	// syncLockDeadline is a call's lock's own deadline (the broker's
	// timeout and a minute: proxy's syncHoldMargin), and a sweep or two.
	syncLockDeadline = brokerTimeout + time.Minute + 5*time.Second
	asyncLockBound   = time.Minute
)

// checkLockAges is (c) while the campaign runs: a lock seen older than its
// bound, with nothing that excuses it in its life: a gateway killed (its
// calls' locks are held to their deadlines, a lost shimmed call is
// decided a minute later), or for an async operation a fault on its
// broker's side or the store's (its polls fail meanwhile).
func (v *verdict) checkLockAges() {
	for _, l := range v.audit {
		age := l.Last.Sub(v.lockStart(l)) // checker_more.go
		// A failover may lose a release, which leaves the lock to block
		// until its deadline (docs/state.md): never one that lets through.
		bound, excuses := syncLockBound, []string{fGatewayKill, fStoreFailover}
		if l.Async || l.Shim != nil {
			bound, excuses = asyncLockBound, slices.Concat([]string{fGatewayKill, fRedisPause, fPgPause, fPgRestart, fStoreFailover}, brokerSide, storeDown)
		}
		if age <= bound || v.faulted("", v.lockStart(l).Add(-time.Second), l.Last, excuses...) {
			continue
		}
		if o := v.callOf(l); !l.Async && l.Shim == nil && age <= syncLockDeadline && o != nil && (o.Status == 0 || o.Status >= 500) &&
			v.storeFaulted(o.End.Add(-time.Second), o.End.Add(500*time.Millisecond), o.Replica) {
			// The store faulted as the call ended without an answer: the
			// hold after it was not written, and the lock lasts to the
			// deadline it was taken with, as documented (guard.hold).
			continue
		}
		what := l.InstanceID
		if l.BindingID != "" {
			what += "/" + l.BindingID
		}
		v.add("c", fmt.Sprintf("%s %s: its %s lock (async %v) lived %s, longer than %s, with no fault to excuse it",
			l.Broker, what, l.Kind, l.Async, age.Round(time.Second), bound), l.InstanceID, l.Started, l.Last)
	}
}

// callOf is the platform's call that took the lock l (nil: none seen).
func (v *verdict) callOf(l *seenLock) *op {
	for _, o := range v.ops {
		if o.Broker == l.Broker && o.Instance == l.InstanceID && o.Binding == l.BindingID && o.Kind == l.Kind &&
			!o.Start.After(l.Started) && !o.End.Before(l.Started) {
			return o
		}
	}
	return nil
}

// check5xx is (d): a 5xx to a mutating call names the broker (and a fault
// on the broker's side was in effect) or the state store (and a fault on
// the store's side, Redis's or PostgreSQL's, was).
func (v *verdict) check5xx() {
	for _, o := range v.ops {
		if !o.mutating() || o.Status < 500 {
			continue
		}
		from, to := o.Start.Add(-2*time.Second), o.End.Add(time.Second)
		d := strings.ToLower(o.Desc)
		if strings.Contains(d, "catalog") {
			// A failed fetch is answered from memory until its retry.
			from = from.Add(-catalogRetryMax)
		}
		switch {
		case strings.Contains(d, "operation state is unavailable") || strings.Contains(d, "state store") ||
			strings.Contains(d, "inventory is unavailable"):
			if !v.storeFaulted(from.Add(-3*time.Second), to, o.Replica) {
				v.add("d", fmt.Sprintf("%s: the state store blamed, and it was not faulted", o), o.Instance, o.Start, o.End)
			}
		case strings.Contains(d, "broker") || strings.Contains(d, "injected fault"):
			if !v.brokerFaulted(o, d, from, to) {
				v.add("d", fmt.Sprintf("%s: the broker blamed, and no fault on its side (a crash, its link, or one on this endpoint that fired) explains it", o), o.Instance, o.Start, o.End)
			}
		default:
			v.add("d", fmt.Sprintf("%s: a 5xx that names neither the broker nor the state store", o), o.Instance, o.Start, o.End)
		}
	}
}

var instanceLevel = map[string]bool{"provision": true, "update": true, "deprovision": true}

// conflicts reports whether a call (endpoint, binding) and another on the
// same instance may not overlap under lock_granularity binding.
func conflicts(ep, binding, otherEp, otherBinding string) bool {
	return instanceLevel[ep] || instanceLevel[otherEp] || binding == otherBinding
}

// checkOverlaps is (e).
func (v *verdict) checkOverlaps() {
	for _, name := range sortedKeys(v.brokers) {
		for _, l := range v.brokers[name].calls {
			for _, f := range l.InFlight {
				if conflicts(l.Endpoint, l.BindingID, f.Endpoint, f.BindingID) {
					v.add("e", fmt.Sprintf("%s saw %s of %s/%s at %s while %s of binding %q was in flight", name, l.Endpoint, l.InstanceID, l.BindingID,
						l.Start.Format("15:04:05.000"), f.Endpoint, f.BindingID), l.InstanceID, l.Start, l.End)
				}
			}
			if p := l.InProgress; p != nil && conflicts(l.Endpoint, l.BindingID, p.Endpoint, p.BindingID) {
				v.add("e", fmt.Sprintf("%s saw %s of %s/%s at %s during its asynchronous %s (%s)", name, l.Endpoint, l.InstanceID, l.BindingID,
					l.Start.Format("15:04:05.000"), p.Endpoint, p.Operation), l.InstanceID, l.Start, l.End)
			}
		}
	}
}

// checkInvented is (f).
func (v *verdict) checkInvented() {
	for _, o := range v.ops {
		var endpoint string
		switch {
		case o.mutating() && o.Status >= 200 && o.Status < 300:
			if o.Status == 202 && v.shimmed[o.Broker] {
				continue // the async shim's own 202: its poll is checked below
			}
			endpoint = o.Kind
		case (o.Kind == "poll" || o.Kind == "poll-binding") && o.State == "succeeded":
			endpoint = v.polled(o)
			if endpoint == "" {
				continue
			}
		default:
			continue
		}
		if !v.sent(o, endpoint) {
			v.add("f", fmt.Sprintf("%s: the platform got a success the broker never sent (no 2xx %s of it in the broker's log)", o, endpoint), o.Instance, o.Start, o.End)
		}
	}
}

// sent reports whether the broker sent the success o got (endpoint is the
// call's, or for a poll the polled call's): a 2xx of the matching call,
// one the broker served while o (for a poll, the call it polls, until the
// poll's end) was in flight, not any earlier 2xx of the same; or, for a
// broker whose repeats the gateway answers, a 200 repeating an earlier
// success.
func (v *verdict) sent(o *op, endpoint string) bool {
	from := o.Start
	if p := v.polledOp(o); p != nil {
		from = p.Start
	}
	earlier := false
	for _, l := range v.brokers[o.Broker].calls {
		if l.Endpoint != endpoint || l.InstanceID != o.Instance || l.BindingID != o.Binding || l.Status < 200 || l.Status >= 300 {
			continue
		}
		if !l.End.Before(from.Add(-clockSlack)) && !l.Start.After(o.End) || v.shared(o, l) {
			return true
		}
		earlier = earlier || l.End.Before(from)
	}
	return earlier && v.idempotent[o.Broker] && o.Status == 200 && (o.Kind == "provision" || o.Kind == "bind")
}

// shared reports whether the broker's call l answered an identical call
// of o's platform that got no answer (it hung up, timed out) and that the
// gateway may still have had in flight when o came, o joining it (the
// flights stage): l began during that call and ended at most the broker's
// timeout before o began (the answer may still have been on its way).
func (v *verdict) shared(o *op, l callLine) bool {
	if o.Of != 0 || l.End.Before(o.Start.Add(-brokerTimeout)) {
		return false
	}
	for _, p := range v.ops {
		if p != o && p.Platform == o.Platform && p.Kind == o.Kind && p.Broker == o.Broker && p.Instance == o.Instance &&
			p.Binding == o.Binding && p.Status == 0 && p.Start.Before(o.Start) && !l.Start.Before(p.Start) {
			return true
		}
	}
	return false
}

// clockSlack is how far the broker's clock and the platform's, both this
// machine's, may disagree on one event (the writes of their logs).
const clockSlack = 50 * time.Millisecond

// polled is the mutating endpoint a succeeded poll reports on: that of
// the op whose 202 it polls.
func (v *verdict) polled(p *op) string {
	if o := v.polledOp(p); o != nil {
		return o.Kind
	}
	return ""
}

// polledOp is the op whose 202 the poll p polls (nil: p is no poll).
func (v *verdict) polledOp(p *op) *op {
	if p.Of == 0 {
		return nil
	}
	for _, o := range v.ops {
		if o.ID == p.Of {
			return o
		}
	}
	return nil
}
