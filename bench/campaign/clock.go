package main

// A replica's wall clock steps (an NTP step, an operator's date): the
// gateway is built with internal/clockjump's tag, which moves the wall
// clock it reads by the offset in a file of its own.

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// jumpClock steps the wall clock of the replica f.Target by f.Offset and,
// after f.For, back. It holds the replica's process (no kill and restart
// meanwhile: a process started during the step would read the stepped
// clock from its start, which is another fault, a replica whose clock is
// off, not a step). Start and End are when the gateway acknowledged each
// step.
func (n *nemesis) jumpClock(f *fault) error {
	g := n.gateway(f.Target)
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	pid := g.pid()
	if err := setClock(g.clockFile, f.Offset); err != nil {
		return err
	}
	f.Start = time.Now()
	time.Sleep(f.For)
	err := setClock(g.clockFile, 0)
	f.End = time.Now()
	if g.pid() != pid || !g.running() {
		err = errors.Join(err, fmt.Errorf("%s (pid %d) is no longer running: see %s", g.name, pid, g.log.Name()))
	}
	if err == nil {
		f.Did = fmt.Sprintf("%s pid %d stepped %+v, and back", g.name, pid, f.Offset)
	}
	return err
}

// setClock writes the offset d into the clock file and waits (at most 5
// s) for the gateway to acknowledge it.
func setClock(file string, d time.Duration) error {
	want := d.String()
	if err := os.WriteFile(file+".tmp", []byte(want+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		raw, err := os.ReadFile(file + ".ack")
		if err == nil && strings.TrimSpace(string(raw)) == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the gateway did not acknowledge the clock offset %s within 5s (built without -tags %s?)", want, baseTags)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// quietWithin is how long the drain waits for the gateways to be quiet
// (no lock, no orphan due): two minutes, and the largest step forward of
// a clock-jump that happened. A gateway restarted after such a step (a
// kill -9 as it ended, a rolling restart) finds the locks its last process
// wrote while its clock was ahead, whose Deadlines are the step too late,
// and keeps them to those Deadlines; the async operations among them are
// polled by the reconciler only once their Started, as late, is old
// enough (the documented limit, docs/faults.md).
func quietWithin(h *history) time.Duration {
	_, faults := h.snapshot()
	ahead := time.Duration(0)
	for _, f := range faults {
		if f.Kind == fClockJump && f.Err == "" {
			ahead = max(ahead, f.Offset)
		}
	}
	return 2*time.Minute + ahead
}
