// This file runs nginx as a reference proxy: a generated nginx.conf in a
// temporary directory, nginx started as a child process in the foreground,
// and its CPU time read from /proc for the master and its workers.

package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"
)

// nginxConf is the configuration: one upstream with an idle keep-alive pool
// larger than the connection counts, HTTP/1.1 to the broker, the broker's
// credentials in place of the platform's, no access log, and client
// connections kept for as many requests as the benchmark sends.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`# written by osb-gateway bench/loadbench
worker_processes auto;
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log warn;
events {
    worker_connections 4096;
}
http {
    access_log off;
    client_body_temp_path {{.Dir}}/client_body;
    proxy_temp_path {{.Dir}}/proxy;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    upstream broker {
        server {{.Broker}};
        keepalive {{.Keepalive}};
        keepalive_requests 100000000;
        keepalive_timeout 120s;
    }
    server {
        listen {{.Listen}};
        location / {
            proxy_pass http://broker;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_set_header Authorization "{{.Auth}}";
        }
    }
}
`))

// nginxVersion returns nginx's version line, or "" when no nginx binary is
// on PATH.
func nginxVersion() string {
	path, err := exec.LookPath("nginx")
	if err != nil {
		return ""
	}
	out, err := exec.Command(path, "-v").CombinedOutput()
	if err != nil {
		return "nginx (version unknown)"
	}
	return strings.TrimSpace(strings.TrimPrefix(string(out), "nginx version: "))
}

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
	listen, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	var conf bytes.Buffer
	err = nginxConf.Execute(&conf, map[string]any{
		"Dir": dir, "Broker": u.Host, "Listen": listen,
		"Keepalive": maxConnsPerTarget, "Auth": basic(brokerUser, brokerPass),
	})
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "nginx.conf"), conf.Bytes(), 0o600)
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
		extraCPU: func() (time.Duration, error) { return treeCPU(master) },
		close:    stop,
	}, nil
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
			continue // gone, or not nginx's
		}
		total += cpu
	}
	return total, nil
}

// procCPU reads utime+stime and the parent pid from /proc/<pid>/stat.
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
