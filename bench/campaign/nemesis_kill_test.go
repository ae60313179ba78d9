package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TestHelperListener is not a test: run as a child (HELPER_ADDR set), it
// listens on HELPER_ADDR and tells each connection its PID, as a gateway
// or broker answers its readiness check; it exits 1 when the address is
// taken, as they do.
func TestHelperListener(t *testing.T) {
	addr := os.Getenv("HELPER_ADDR")
	if addr == "" {
		t.Skip("a helper process for TestOverlappingKillsOfOneProcess")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		fmt.Fprint(c, os.Getpid())
		c.Close()
	}
}

// answering is the PID of the process answering on addr (0: none).
func answering(addr string) int {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return 0
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	raw, _ := io.ReadAll(c)
	pid, _ := strconv.Atoi(string(raw))
	return pid
}

// Two kill -9 faults that overlap on one process must leave the process
// that answers the one the nemesis tracks, each kill killing a real one.
func TestOverlappingKillsOfOneProcess(t *testing.T) {
	addr := freeAddr()
	log, err := os.CreateTemp(t.TempDir(), "helper")
	if err != nil {
		t.Fatal(err)
	}
	p := &proc{name: "helper", log: log}
	t.Setenv("HELPER_ADDR", addr)
	// start is the brokers' start: a new process, ready once it answers,
	// tried again while it exits at once (its port still taken).
	start := func() error {
		for attempt := 0; attempt < 20; attempt++ {
			if err := p.startCmd(os.Args[0], "-test.run=^TestHelperListener$"); err != nil {
				return err
			}
			err := waitReady("helper", func() bool {
				select {
				case <-p.done:
					return true
				default:
				}
				return answering(addr) != 0
			})
			select {
			case <-p.done:
				time.Sleep(50 * time.Millisecond)
				continue
			default:
			}
			return err
		}
		return fmt.Errorf("the helper exited at start 20 times")
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.kill9() })
	faults := []*fault{{N: 1, For: 300 * time.Millisecond}, {N: 2, For: 100 * time.Millisecond}}
	var wg sync.WaitGroup
	errs := make([]error, len(faults))
	for i, f := range faults {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 50 * time.Millisecond) // the second begins while the first runs
			errs[i] = killAndRestart(f, p, addr, start)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("fault %d: %v", i+1, err)
		}
	}
	if got, want := answering(addr), p.pid(); got != want {
		t.Fatalf("pid %d answers, the nemesis tracks pid %d: a process it no longer tracks", got, want)
	}
	a, b := faults[0], faults[1]
	if a.PID == b.PID || a.NewPID != b.PID || b.NewPID != p.pid() {
		t.Errorf("kills: %d→%d then %d→%d; want each to kill the process the one before started", a.PID, a.NewPID, b.PID, b.NewPID)
	}
	if b.Start.Before(a.End) && !a.End.IsZero() {
		t.Errorf("the second kill began at %s, before the first restart ended at %s", b.Start, a.End)
	}
}
