package reference

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestProcUsageOfItself reads this process's usage while it burns CPU in
// user space and sleeps: its user time must grow, this thread's context
// switches too, and ProcCPU must agree with the user and system times
// read the same way.
func TestProcUsageOfItself(t *testing.T) {
	runtime.LockOSThread() // its own switches are read from its task's status
	defer runtime.UnlockOSThread()
	pid := os.Getpid()
	thread := func() int64 {
		b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(syscall.Gettid()) + "/status")
		if err != nil {
			t.Fatal(err)
		}
		n, err := parseSwitches(b)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	before, ppid, err := ProcUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	if ppid != os.Getppid() {
		t.Errorf("parent pid %d, want %d", ppid, os.Getppid())
	}
	own := thread()
	// /proc counts in ticks of 10 ms: work until a tick more of user time
	// and a few more switches show, within a generous deadline.
	deadline := time.Now().Add(30 * time.Second)
	x := uint64(1)
	var now Usage
	for {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		time.Sleep(time.Millisecond) // a voluntary switch of this thread
		if now, _, err = ProcUsage(pid); err != nil {
			t.Fatal(err)
		}
		d := now.Sub(before)
		if d.User > 0 && thread()-own >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: used %+v since the first reading, this thread %d switches (x %d)", d, thread()-own, x)
		}
	}
	if d := now.Sub(before); d.CPU() != d.User+d.System || d.System < 0 || now.Switches < thread() {
		t.Errorf("usage %+v (CPU %s), switches %d: fewer than this thread's %d", d, d.CPU(), now.Switches, thread())
	}
	cpu, _, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	if cpu < now.CPU() {
		t.Errorf("ProcCPU %s, less than the user and system time read before it (%s)", cpu, now.CPU())
	}
	tree, err := TreeUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	// (Not the switches: a thread that ended meanwhile takes its count.)
	if tree.CPU() < now.CPU() || tree.Switches <= 0 {
		t.Errorf("TreeUsage %+v, less CPU than the process's own %+v read before it, or no switches", tree, now)
	}
}

func TestProcUsageOfNoProcess(t *testing.T) {
	// pid_max is at most 2^22: this pid cannot exist.
	if _, _, err := ProcUsage(1 << 23); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("ProcUsage of no process: %v, want a missing file", err)
	}
}
