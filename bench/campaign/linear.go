package main

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/anishathalye/porcupine"
)

// (g) What a platform reads agrees with what it was told: per instance and
// per binding, the platform's history — creations and deletions with their
// outcomes (succeeded, refused, or unknown: a 5xx, no answer, a poll given
// up), and its GET instance and GET binding answers (200: exists; 404 or
// 410: does not) — must be linearizable against a model of one resource
// that exists or not (github.com/anishathalye/porcupine). A GET that says
// "gone" after a success the platform was told, or "exists" after a
// deletion it was told ended, with nothing ambiguous in between, breaks it.

// inventoryLag is how long after the state store is back an emulated read
// may still lag: the retry queue's longest backoff, and a second.
const inventoryLag = 6 * time.Second

// Outcomes of a creation or deletion, as the platform knows them.
const (
	outcomeOK      = "ok"
	outcomeNo      = "no"      // refused: nothing changed
	outcomeUnknown = "unknown" // it may or may not have happened
)

// lin is one operation of the model: a creation, a deletion or a read.
type lin struct {
	kind    string // create, delete, read
	outcome string // create/delete: outcomeOK, outcomeNo, outcomeUnknown
	exists  bool   // read: what it said
	op      *op    // the platform's call (its first, for an async one)
}

var existence = porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{false} },
	Step: func(state, input, _ interface{}) []interface{} {
		s, in := state.(bool), input.(lin)
		switch in.kind {
		case "read":
			if in.exists == s {
				return []interface{}{s}
			}
			return nil
		case "create":
			switch in.outcome {
			case outcomeOK:
				return []interface{}{true}
			case outcomeNo:
				return []interface{}{s}
			}
			return []interface{}{s, true}
		default: // delete
			switch in.outcome {
			case outcomeOK:
				return []interface{}{false}
			case outcomeNo:
				return []interface{}{s}
			}
			return []interface{}{s, false}
		}
	},
	DescribeOperation: func(input, _ interface{}) string {
		in := input.(lin)
		if in.kind == "read" {
			return fmt.Sprintf("read exists=%v (op %d)", in.exists, in.op.ID)
		}
		return fmt.Sprintf("%s %s (op %d)", in.kind, in.outcome, in.op.ID)
	},
}

// linearOps turns the history into the model's operations per resource
// ("broker instance[/binding]").
func linearOps(ops []*op, t0 time.Time, skipRead func(*op) bool) map[string][]porcupine.Operation {
	byID := map[int64]*op{}
	terminal := map[int64]*op{} // a 202's terminal poll
	for _, o := range ops {
		byID[o.ID] = o
	}
	for _, o := range ops {
		if o.Of == 0 {
			continue
		}
		if o.Status == 410 || (o.Status == 200 && (o.State == "succeeded" || o.State == "failed")) {
			if _, seen := terminal[o.Of]; !seen {
				terminal[o.Of] = o
			}
		}
	}
	never := int64(math.MaxInt64 / 2)
	ts := func(t time.Time) int64 { return t.Sub(t0).Nanoseconds() }
	out := map[string][]porcupine.Operation{}
	for _, o := range ops {
		key := o.Broker + " " + o.Instance
		if o.Binding != "" {
			key += "/" + o.Binding
		}
		var in lin
		ret := ts(o.End)
		switch o.Kind {
		case "get", "get-binding":
			if skipRead(o) {
				continue
			}
			switch o.Status {
			case 200:
				in = lin{kind: "read", exists: true}
			case 404, 410:
				in = lin{kind: "read", exists: false}
			default:
				continue
			}
		case "provision", "bind", "deprovision", "unbind":
			in.kind = "create"
			if o.Kind == "deprovision" || o.Kind == "unbind" {
				in.kind = "delete"
			}
			switch {
			case o.Status == 202:
				t := terminal[o.ID]
				switch {
				case t == nil:
					in.outcome, ret = outcomeUnknown, never
				case t.State == "succeeded" || (t.Status == 410 && in.kind == "delete"):
					in.outcome, ret = outcomeOK, ts(t.End)
				default: // failed, or 410 to a creation's poll
					in.outcome, ret = outcomeNo, ts(t.End)
				}
			case in.kind == "create" && (o.Status == 200 || o.Status == 201):
				in.outcome = outcomeOK
			case in.kind == "delete" && (o.Status == 200 || o.Status == 410):
				in.outcome = outcomeOK
			case o.Status >= 400 && o.Status < 500:
				in.outcome = outcomeNo
			default: // a 5xx, another 2xx, or no answer
				in.outcome, ret = outcomeUnknown, never
			}
		default:
			continue
		}
		in.op = o
		out[key] = append(out[key], porcupine.Operation{ClientId: o.Platform, Input: in, Call: ts(o.Start), Output: nil, Return: ret})
	}
	return out
}

// checkReads is (g).
func (v *verdict) checkReads() {
	if len(v.ops) == 0 {
		return
	}
	t0 := v.ops[0].Start
	model := existence.ToModel()
	// emulate.fetch answers from the inventory, which a replica that
	// could not write a record (the store down) writes when the store is
	// back, within its retry backoff (5 s at most): a read there may lag
	// what the platform was told by that much (docs/legacy-brokers.md).
	lag := func(o *op) bool {
		return v.fetched[o.Broker] && v.storeFaulted(o.Start.Add(-inventoryLag), o.End, -1)
	}
	hist := linearOps(v.ops, t0, lag)
	keys := make([]string, 0, len(hist))
	for k := range hist {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		h := hist[k]
		reads := false
		for _, o := range h {
			reads = reads || o.Input.(lin).kind == "read"
		}
		if !reads {
			continue
		}
		switch porcupine.CheckOperationsTimeout(model, h, 10*time.Second) {
		case porcupine.Ok:
			continue
		case porcupine.Unknown:
			v.violations = append(v.violations, violation{Rule: "g", What: k + ": its history could not be checked within 10 s"})
			continue
		}
		first, last := h[0].Input.(lin).op, h[len(h)-1].Input.(lin).op
		v.add("g", fmt.Sprintf("%s: what the platform read (GET) does not agree with any order of what it was told", k),
			first.Instance, first.Start, last.End)
	}
}
