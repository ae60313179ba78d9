// This file runs wrk, the external closed-loop load generator, and reads
// its report.

package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// wrkResult is what one wrk run reports.
type wrkResult struct {
	requests int64
	rps      float64
	p50, p99 time.Duration
	// failed counts non-2xx/3xx answers and socket errors.
	failed int64
}

// runWrk runs wrk -t1 with conns keep-alive connections for d against url
// with the header lines, and returns its report.
func runWrk(ctx context.Context, url string, header []string, conns int, d time.Duration) (wrkResult, error) {
	args := []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + wrkDuration(d), "--latency", "--timeout", "10s"}
	for _, h := range header {
		args = append(args, "-H", h)
	}
	args = append(args, url)
	cmd := exec.CommandContext(ctx, "wrk", args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return wrkResult{}, fmt.Errorf("wrk %s: %v: %s", strings.Join(args, " "), err, out)
	}
	r, err := parseWrk(string(out))
	if err != nil {
		return r, fmt.Errorf("wrk %s: %w; output:\n%s", url, err, out)
	}
	return r, nil
}

// wrkDuration is d in wrk's syntax: whole seconds, at least one.
func wrkDuration(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second/2)/time.Second))) + "s"
}

// parseWrk reads the request count, requests/s, the 50th and 99th
// percentiles (--latency) and the failures from wrk's report.
func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	var sawCount, sawRate bool
	s := bufio.NewScanner(strings.NewReader(out))
	for s.Scan() {
		f := strings.Fields(s.Text())
		switch {
		case len(f) == 2 && f[0] == "50%":
			r.p50 = parseWrkLatency(f[1])
		case len(f) == 2 && f[0] == "99%":
			r.p99 = parseWrkLatency(f[1])
		case len(f) >= 3 && f[1] == "requests" && f[2] == "in":
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return r, fmt.Errorf("request count %q: %w", f[0], err)
			}
			r.requests, sawCount = n, true
		case len(f) == 2 && f[0] == "Requests/sec:":
			v, err := strconv.ParseFloat(f[1], 64)
			if err != nil {
				return r, fmt.Errorf("requests/sec %q: %w", f[1], err)
			}
			r.rps, sawRate = v, true
		case len(f) == 5 && f[0] == "Non-2xx":
			n, _ := strconv.ParseInt(f[4], 10, 64)
			r.failed += n
		case len(f) >= 2 && f[0] == "Socket" && f[1] == "errors:":
			// Socket errors: connect 0, read 0, write 0, timeout 0
			for i := 2; i+1 < len(f); i += 2 {
				n, _ := strconv.ParseInt(strings.TrimSuffix(f[i+1], ","), 10, 64)
				r.failed += n
			}
		}
	}
	if !sawCount || !sawRate || r.p50 == 0 {
		return r, fmt.Errorf("no request count, requests/sec or 50%% latency in wrk's report")
	}
	return r, nil
}

// parseWrkLatency reads a wrk latency such as "812.00us", "1.23ms" or
// "2.00s"; 0 when it cannot.
func parseWrkLatency(s string) time.Duration {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"us", time.Microsecond}, {"ms", time.Millisecond}, {"m", time.Minute}, {"s", time.Second}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0
			}
			return time.Duration(f * float64(u.unit))
		}
	}
	return 0
}

// wrkVersion returns wrk's version line ("wrk 4.1.0 ..."), or "".
func wrkVersion() string {
	out, _ := exec.Command("wrk", "-v").CombinedOutput() // wrk -v exits 1
	line, _, _ := strings.Cut(string(out), "\n")
	v, _, _ := strings.Cut(strings.TrimSpace(line), " [")
	return v
}

// ensureTool finds name on PATH, or installs the Debian package pkg with
// apt-get when install is set and this process runs as root; otherwise it
// says how to install it.
func ensureTool(name, pkg string, install bool, log func(string, ...any)) error {
	if _, err := exec.LookPath(name); err == nil {
		return nil
	}
	how := fmt.Sprintf("%s is not installed: run `apt-get install %s` (Debian) as root", name, pkg)
	if !install || os.Geteuid() != 0 {
		return fmt.Errorf("%s", how)
	}
	log("installing %s (apt-get install %s)", name, pkg)
	for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", pkg}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %v: %s; %s", strings.Join(args, " "), err, out, how)
		}
	}
	if _, err := exec.LookPath(name); err != nil {
		return fmt.Errorf("%s still not on PATH after apt-get install %s", name, pkg)
	}
	return nil
}
