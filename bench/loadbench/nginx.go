// This file runs nginx as a reference proxy: a generated nginx.conf in a
// temporary directory, nginx started as a child process in the foreground,
// and its CPU time read from /proc for the master and its workers.

package main

import (
	"bytes"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// startNginx starts nginx in front of the broker at brokerURL and waits
// until it accepts connections. The target's close stops nginx and removes
// its directory.
func startNginx(brokerURL string) (*target, error) {
	u, err := url.Parse(brokerURL)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "loadbench-nginx-")
	if err != nil {
		return nil, err
	}
	// Workers run as an unprivileged user when nginx starts as root; they
	// must reach the temporary directories nginx creates here.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	listen, err := reference.FreePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	conf, err := reference.NginxConf(reference.Nginx{By: "bench/loadbench", Dir: dir, Broker: u.Host, Listen: listen,
		Keepalive: maxConnsPerTarget, Auth: basic(brokerUser, brokerPass)})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "nginx.conf"), conf, 0o600)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command("nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"),
		"-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;")
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting nginx: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		stopNginx(cmd, exited)
		os.RemoveAll(dir)
	}
	if err := waitListening(listen, exited, 5*time.Second); err != nil {
		stop()
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return nil, fmt.Errorf("nginx: %w; output: %s %s", err, strings.TrimSpace(stderr.String()), log)
	}
	master := cmd.Process.Pid
	return &target{
		name:     targetNginx,
		base:     "http://" + listen,
		header:   platformHeader(),
		extraCPU: func() (time.Duration, error) { return reference.TreeCPU(master) },
		close:    stop,
	}, nil
}

// waitListening dials addr until it answers, nginx exits, or timeout passes.
func waitListening(addr string, exited <-chan error, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case err := <-exited:
			return fmt.Errorf("exited before listening: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening on %s after %s", addr, timeout)
		}
	}
}

// stopNginx asks the master to stop (SIGTERM: fast shutdown) and kills it
// when it is still running after two seconds.
func stopNginx(cmd *exec.Cmd, exited <-chan error) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(2 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}
