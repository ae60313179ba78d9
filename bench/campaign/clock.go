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
