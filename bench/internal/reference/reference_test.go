package reference

import (
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestParseSwitches(t *testing.T) {
	status := "Name:\tosb-gateway\nState:\tS (sleeping)\nThreads:\t7\n" +
		"voluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	n, err := parseSwitches([]byte(status))
	if err != nil || n != 1234 {
		t.Fatalf("parseSwitches = %d, %v; want 1234", n, err)
	}
	for name, bad := range map[string]string{
		"neither":       "Name:\tx\nState:\tR\n",
		"one of them":   "voluntary_ctxt_switches:\t5\n",
		"not a number":  "voluntary_ctxt_switches:\tfive\nnonvoluntary_ctxt_switches:\t1\n",
		"no final LF":   "voluntary_ctxt_switches:\t5\nnonvoluntary_ctxt_switches:",
		"negative sign": "voluntary_ctxt_switches:\t-\nnonvoluntary_ctxt_switches:\t1\n",
	} {
		if n, err := parseSwitches([]byte(bad)); err == nil {
			t.Errorf("%s: parseSwitches(%q) = %d, want an error", name, bad, n)
		}
	}
}

// TestProcUsageOfItself reads this process's usage while it burns CPU in
// user space and sleeps: its user time and its context switches must grow,
// and ProcCPU must agree with the user and system times read the same way.
func TestProcUsageOfItself(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	pid := os.Getpid()
	before, ppid, err := ProcUsage(pid)
	if err != nil {
		t.Fatal(err)
	}
	if ppid != os.Getppid() {
		t.Errorf("parent pid %d, want %d", ppid, os.Getppid())
	}
	// /proc counts in ticks of 10 ms: work until a tick more of user time
	// and a few more switches show, within a generous deadline.
	deadline := time.Now().Add(30 * time.Second)
	x := uint64(1)
	var now Usage
	for {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		time.Sleep(time.Millisecond) // a voluntary switch
		if now, _, err = ProcUsage(pid); err != nil {
			t.Fatal(err)
		}
		d := now.Sub(before)
		if d.User > 0 && d.Switches >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 30 s: used %+v since the first reading (x %d)", d, x)
		}
	}
	if d := now.Sub(before); d.CPU() != d.User+d.System || d.System < 0 {
		t.Errorf("usage %+v: CPU %s", d, d.CPU())
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
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	// pid_max is at most 2^22: this pid cannot exist.
	if _, _, err := ProcUsage(1 << 23); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("ProcUsage of no process: %v, want a missing file", err)
	}
}
