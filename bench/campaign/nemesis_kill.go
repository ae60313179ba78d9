package main

// The nemesis's faults as they really happened: a kill -9 and restart of
// one process at a time, each verified by PID, and when a broker's
// injected fault fired.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// killAndRestart carries out a kill -9 fault on p, whose listener is
// addr: it waits for any earlier kill-and-restart of p to end (two faults
// that overlap on one process used to leave a process the nemesis no
// longer tracked: the second restart failed on the port or the bolt lock,
// while the first answered its readiness check), then kills p's process,
// checks it is gone (reaped, its PID no longer signalled, its port
// refusing), waits f.For and starts it again, checking the new process has
// another PID and is still the one running once it answers readiness.
// f.Start, f.PID and f.NewPID record what really happened.
func killAndRestart(f *fault, p *proc, addr string, start func() error) error {
	p.faultMu.Lock()
	defer p.faultMu.Unlock()
	f.Start = time.Now()
	defer func() { f.End = time.Now() }()
	pid, err := p.kill9()
	f.PID = pid
	if err == nil {
		err = gone(pid, addr)
	}
	time.Sleep(f.For)
	if serr := start(); serr != nil {
		return errors.Join(err, serr)
	}
	f.NewPID = p.pid()
	switch {
	case err != nil:
		return err
	case f.NewPID == 0 || f.NewPID == pid:
		return fmt.Errorf("%s restarted as pid %d, killed pid %d", p.name, f.NewPID, pid)
	case !p.running():
		return fmt.Errorf("%s: pid %d exited after answering readiness (another process answered it)", p.name, f.NewPID)
	}
	return nil
}

// gone checks that the killed process pid no longer exists and nothing
// answers on its address any more (at most two seconds).
func gone(pid int, addr string) error {
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pid %d still exists after kill -9 (signal 0: %v)", pid, err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still answers after pid %d was killed: a process the nemesis does not track", addr, pid)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// watchFired watches the broker's faults until until, or until the fault
// it was given (want, of which count were armed) is used up, and returns
// when each use was seen (within a tenth of a second). A broker that
// crashed meanwhile lost what was left: its new process is not watched.
func watchFired(b *brokerProc, want samplebroker.Fault, count int, until time.Time) []time.Time {
	var fired []time.Time
	pid, left := b.pid(), count
	for left > 0 && time.Now().Before(until) {
		time.Sleep(100 * time.Millisecond)
		raw, err := b.control(http.MethodGet, "fault", nil)
		if b.pid() != pid {
			break
		}
		var in []samplebroker.Fault
		if err != nil || json.Unmarshal(raw, &in) != nil {
			continue // down, or cut off: the next look tells
		}
		n := 0
		for _, x := range in {
			if x.Count > 0 && x.Endpoint == want.Endpoint && x.Status == want.Status && x.Body == want.Body &&
				x.Hang == want.Hang && x.Latency == want.Latency && x.FailOperation == want.FailOperation {
				n = x.Count
				break
			}
		}
		for now := time.Now(); left > n; left-- {
			fired = append(fired, now)
		}
	}
	if wait := time.Until(until); wait > 0 {
		time.Sleep(wait)
	}
	return fired
}
