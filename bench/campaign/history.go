package main

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"
)

// op is one call a platform made, as it saw it: the history the checker
// judges.
type op struct {
	ID       int64     `json:"id"`
	Platform int       `json:"platform"`
	Tenant   string    `json:"tenant"`
	Broker   string    `json:"broker"`
	Kind     string    `json:"kind"` // provision, update, deprovision, bind, unbind, poll, poll-binding, get, get-binding, catalog
	Instance string    `json:"instance"`
	Binding  string    `json:"binding,omitempty"`
	Replica  int       `json:"replica"`
	Mode     string    `json:"mode,omitempty"`
	Why      string    `json:"why,omitempty"` // "orphan-mitigation", "retry", "race"
	Of       int64     `json:"of,omitempty"`  // a poll's: the op whose 202 it polls
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
	Status   int       `json:"status"`
	State    string    `json:"state,omitempty"` // a poll's state
	Desc     string    `json:"desc,omitempty"`
	Err      string    `json:"err,omitempty"`
}

// mutating reports whether the op's kind changes something at the broker.
func (o *op) mutating() bool {
	switch o.Kind {
	case "provision", "update", "deprovision", "bind", "unbind":
		return true
	}
	return false
}

func (o *op) String() string {
	what := o.Instance
	if o.Binding != "" {
		what += "/" + o.Binding
	}
	s := fmt.Sprintf("op %d p%d %s %s %s via gw%d %s→%s", o.ID, o.Platform, o.Broker, o.Kind, what, o.Replica,
		o.Start.Format("15:04:05.000"), o.End.Format("15:04:05.000"))
	if o.Mode != "" {
		s += " [" + o.Mode + "]"
	}
	if o.Why != "" {
		s += " (" + o.Why + ")"
	}
	switch {
	case o.Status != 0:
		s += fmt.Sprintf(": %d", o.Status)
		if o.State != "" {
			s += " " + o.State
		}
		if o.Desc != "" {
			s += " " + fmt.Sprintf("%q", trim(o.Desc, 160))
		}
	default:
		s += ": no answer: " + trim(o.Err, 160)
	}
	return s
}

func trim(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// history is every op and every fault of a run, in order of their start.
type history struct {
	mu     sync.Mutex
	ops    []*op
	faults []*fault
	nextID int64
	log    io.Writer // one JSON line per op as it ends; nil: none
}

func (h *history) add(o *op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.nextID++
	o.ID = h.nextID
	h.ops = append(h.ops, o)
	if h.log != nil {
		b, _ := json.Marshal(o)
		_, _ = h.log.Write(append(b, '\n'))
	}
}

func (h *history) addFault(f *fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.faults = append(h.faults, f)
}

func (h *history) snapshot() ([]*op, []*fault) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]*op(nil), h.ops...), append([]*fault(nil), h.faults...)
}

// around is what happened near t (the ops on the same instance and the
// faults within a few seconds), for a violation's report.
func around(ops []*op, faults []*fault, instance string, from, to time.Time) string {
	var b strings.Builder
	var near []*op
	for _, o := range ops {
		if instance != "" && o.Instance == instance {
			near = append(near, o)
		}
	}
	sort.Slice(near, func(i, j int) bool { return near[i].Start.Before(near[j].Start) })
	for i, o := range near {
		if len(near) > 14 && i >= 4 && i < len(near)-10 {
			if i == 4 {
				fmt.Fprintf(&b, "      … %d more\n", len(near)-14)
			}
			continue
		}
		fmt.Fprintf(&b, "      %s\n", o)
	}
	for _, f := range faults {
		if f.Start.Before(to.Add(5*time.Second)) && f.End.After(from.Add(-5*time.Second)) {
			fmt.Fprintf(&b, "      %s\n", f)
		}
	}
	return b.String()
}
