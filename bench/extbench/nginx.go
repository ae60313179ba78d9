// This file runs nginx as the reference proxy, as bench/loadbench does: a
// generated nginx.conf in a temporary directory and nginx in the foreground
// as a child process; its CPU time is its master's and its workers'.

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
)

// startNginx starts nginx in front of the broker at brokerAddr (host:port)
// in a directory under dir and returns it with its address.
func startNginx(dir, brokerAddr string) (*proc, string, error) {
	dir = filepath.Join(dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	// Workers run as an unprivileged user when nginx starts as root; they
	// must reach the temporary directories nginx creates here.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, "", err
	}
	listen, err := reference.FreePort()
	if err != nil {
		return nil, "", err
	}
	conf, err := reference.NginxConf(reference.Nginx{By: "bench/extbench", Dir: dir, Broker: brokerAddr, Listen: listen,
		Keepalive: 256, Auth: basic(brokerUser, brokerPass)})
	if err != nil {
		return nil, "", err
	}
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), conf, 0o644); err != nil {
		return nil, "", err
	}
	p, tail, err := start(exec.Command("nginx", "-p", dir, "-e", filepath.Join(dir, "error.log"),
		"-c", filepath.Join(dir, "nginx.conf"), "-g", "daemon off;"))
	if err != nil {
		return nil, "", err
	}
	p.tree = true
	if err := waitListening(listen, p, tail, 5*time.Second); err != nil {
		p.stop()
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		return nil, "", fmt.Errorf("nginx: %w %s", err, bytes.TrimSpace(log))
	}
	return p, listen, nil
}
