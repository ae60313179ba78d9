package main

// The operator's own hand during calls: a rolling restart (SIGTERM, the
// gateway's drain, a new process, one replica after another) and a
// reload of the configuration (SIGHUP, POST /admin/reload, or a change of
// the file, which the gateway watches).

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// rollingRestart stops every replica in turn with SIGTERM, waits for it
// to drain and exit, and starts it again before the next. The load
// balancer (the platforms' choice of replica) stops sending to a replica
// as its SIGTERM goes out; the gateway's listen.shutdown_delay (5 s)
// still answers what comes before that, then in-flight calls get
// listen.shutdown_grace (30 s) to end.
func (n *nemesis) rollingRestart(f *fault) error {
	var did []string
	var errs []error
	for i, g := range n.c.gateways {
		s, err := terminateAndRestart(g, func(t time.Time) {
			if i == 0 {
				f.Start = t
			}
		})
		did = append(did, s)
		if err != nil {
			errs = append(errs, err)
		}
	}
	f.Did = strings.Join(did, "; ")
	return errors.Join(errs...)
}

// terminateAndRestart is one step of a rolling restart, holding g's
// process as a kill does; sent is told when the SIGTERM went out.
func terminateAndRestart(g *gatewayProc, sent func(time.Time)) (string, error) {
	g.faultMu.Lock()
	defer g.faultMu.Unlock()
	g.mu.Lock()
	cmd, done := g.cmd, g.done
	g.mu.Unlock()
	pid := cmd.Process.Pid
	g.up.Store(false)
	at := time.Now()
	sent(at)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Sprintf("%s pid %d: no SIGTERM", g.name, pid), err
	}
	var err error
	select {
	case <-done:
	case <-time.After(time.Minute):
		err = fmt.Errorf("%s pid %d still runs a minute after SIGTERM", g.name, pid)
		_ = cmd.Process.Kill()
		<-done
	}
	took := time.Since(at).Round(100 * time.Millisecond)
	code := cmd.ProcessState.ExitCode()
	if err == nil && code != 0 {
		err = fmt.Errorf("%s pid %d exited %d after SIGTERM (1: the drain was cut short); see %s", g.name, pid, code, g.log.Name())
	}
	if err == nil {
		err = gone(pid, g.listen)
	}
	if serr := g.start(); serr != nil {
		return fmt.Sprintf("%s pid %d exit %d after %s, not started again", g.name, pid, code, took), errors.Join(err, serr)
	}
	if np := g.pid(); np == pid || !g.running() {
		err = errors.Join(err, fmt.Errorf("%s: pid %d after the restart, killed %d", g.name, np, pid))
	}
	return fmt.Sprintf("%s pid %d exit %d after %s → pid %d", g.name, pid, code, took, g.pid()), err
}

// reload reloads the replica f.Target's configuration as f.Detail says,
// and checks it took: the admin API's answer, or
// osb_gateway_config_reload_total{result="success"} going up.
func (n *nemesis) reload(f *fault) error {
	g := n.gateway(f.Target)
	g.faultMu.Lock() // not during a kill: the reload is of a running process
	defer g.faultMu.Unlock()
	before, err := g.reloads()
	if err != nil {
		return err
	}
	f.Start = time.Now()
	switch f.Detail {
	case "sighup":
		err = g.signal(syscall.SIGHUP)
	case "admin":
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.admin+"/admin/reload", nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		res, rerr := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if rerr != nil {
			return rerr
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("POST /admin/reload: %s %s", res.Status, raw)
		}
	case "file":
		err = touchConfig(g.config, f.N)
	}
	if err != nil {
		return err
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		after, err := g.reloads()
		if err == nil && after > before {
			f.Did = fmt.Sprintf("%s pid %d reloaded (%s)", g.name, g.pid(), f.Detail)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not reload within 5s of the %s (reloads %v → %v, %v)", g.name, f.Detail, before, after, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// touchConfig changes the configuration file without changing what it
// configures: its last line, a comment, names the fault.
func touchConfig(path string, n int) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(raw)
	if i := strings.Index(s, "# reload "); i >= 0 {
		s = s[:i]
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(s+"# reload "+strconv.Itoa(n)+"\n"), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// reloads is the gateway's count of successful reloads (its metrics).
func (g *gatewayProc) reloads() (float64, error) {
	res, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + g.admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return reloadCount(res.Body)
}

// reloadCount reads osb_gateway_config_reload_total{result="success"} in
// a Prometheus text exposition (0 when it is not there: no reload yet).
func reloadCount(r io.Reader) (float64, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "osb_gateway_config_reload_total{") && strings.Contains(line, `result="success"`) {
			return strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		}
	}
	return 0, sc.Err()
}
