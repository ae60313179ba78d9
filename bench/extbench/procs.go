// This file starts and stops the benchmark's processes and reads their CPU
// time from /proc.

package main

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// proc is a server process the benchmark started.
type proc struct {
	cmd    *exec.Cmd
	exited chan error
	// tree: its CPU time includes its direct children's (nginx's workers).
	tree bool
}

// usage returns what the process (with nginx's workers) used so far:
// user and system CPU time, context switches.
func (p *proc) usage() (reference.Usage, error) {
	if p.tree {
		return reference.TreeUsage(p.cmd.Process.Pid)
	}
	u, _, err := reference.ProcUsage(p.cmd.Process.Pid)
	return u, err
}

// stop asks the process to stop (SIGTERM) and kills it when it is still
// running after five seconds.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// start starts cmd with its standard error kept in a bounded buffer (for
// the error when it fails to start).
func start(cmd *exec.Cmd) (*proc, *tailBuffer, error) {
	tail := &tailBuffer{max: 8 << 10}
	if cmd.Stderr == nil {
		cmd.Stderr = tail
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p := &proc{cmd: cmd, exited: make(chan error, 1)}
	go func() { p.exited <- cmd.Wait() }()
	return p, tail, nil
}

// startPrinting starts cmd, which prints the address it listens on as its
// first line of standard output, and returns the process and the address.
func startPrinting(cmd *exec.Cmd) (*proc, string, error) {
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	p, tail, err := start(cmd)
	if err != nil {
		return nil, "", err
	}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		if s.Scan() {
			line <- strings.TrimSpace(s.Text())
		}
		close(line)
		for s.Scan() { // keep the pipe drained
		}
	}()
	select {
	case addr, ok := <-line:
		if ok {
			return p, addr, nil
		}
	case <-time.After(10 * time.Second):
	}
	p.stop()
	return nil, "", fmt.Errorf("%s printed no address; standard error: %s", cmd.Path, tail)
}

// waitListening dials addr until it answers, the process exits, or timeout
// passes.
func waitListening(addr string, p *proc, tail fmt.Stringer, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-p.exited:
			p.exited <- err // for stop
			return fmt.Errorf("%s exited before listening: %v; standard error: %s", p.cmd.Path, err, tail)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not listening on %s after %s; standard error: %s", p.cmd.Path, addr, timeout, tail)
		}
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	mu  sync.Mutex
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
