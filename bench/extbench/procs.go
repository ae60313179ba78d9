// This file starts and stops the benchmark's processes and reads their CPU
// time from /proc.

package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server process the benchmark started.
type proc struct {
	cmd    *exec.Cmd
	exited chan error
	// tree: its CPU time includes its direct children's (nginx's workers).
	tree bool
}

// cpu returns the process's user+system CPU time so far.
func (p *proc) cpu() (time.Duration, error) {
	if p.tree {
		return treeCPU(p.cmd.Process.Pid)
	}
	c, _, err := procCPU(p.cmd.Process.Pid)
	return c, err
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

// freePort returns a loopback address with a port that was free a moment
// ago.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
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

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 per second for user space.
const clockTick = 10 * time.Millisecond

// treeCPU returns the user+system CPU time of the process pid and its
// direct children (nginx's master and workers).
func treeCPU(pid int) (time.Duration, error) {
	total, _, err := procCPU(pid)
	if err != nil {
		return 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		cpu, ppid, err := procCPU(child)
		if err != nil || ppid != pid {
			continue // gone, or not a child
		}
		total += cpu
	}
	return total, nil
}

// procCPU reads utime+stime (all threads) and the parent pid from
// /proc/<pid>/stat.
func procCPU(pid int) (cpu time.Duration, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, errors.New("short /proc stat")
	}
	ppid, err1 := strconv.Atoi(f[1])               // field 4
	utime, err2 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err3 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, err
	}
	return time.Duration(utime+stime) * clockTick, ppid, nil
}
