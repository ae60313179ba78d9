// Package reference holds what bench/loadbench and bench/extbench both
// measure the gateway against: nginx's configuration and version, a bare
// tuned httputil.ReverseProxy, and CPU time read from /proc.
package reference

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// nginxConf: one upstream with an idle keep-alive pool larger than the
// connection counts, HTTP/1.1 to the broker, the broker's credentials in
// place of the platform's, no access log, client connections kept for as
// many requests as the benchmark sends, one worker per core.
var nginxConf = template.Must(template.New("nginx.conf").Parse(`# written by osb-gateway {{.By}}
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

// Nginx describes the nginx.conf NginxConf writes.
type Nginx struct {
	By        string // the benchmark that wrote it, for the file's first line
	Dir       string // nginx's prefix: pid, logs and temporary files
	Broker    string // the broker's host:port
	Listen    string // nginx's host:port
	Keepalive int    // idle connections kept to the broker
	Auth      string // the Authorization header sent to the broker
}

// NginxConf returns the nginx.conf of n.
func NginxConf(n Nginx) ([]byte, error) {
	var b bytes.Buffer
	err := nginxConf.Execute(&b, n)
	return b.Bytes(), err
}

// NginxVersion returns nginx's version ("nginx/1.22.1"), or "" when no
// nginx binary is on PATH.
func NginxVersion() string {
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

// NewServer returns an http.Server for h with the gateway's default
// platform-facing settings (listen's timeouts and header limit) and no
// error log: every server a benchmark runs gets them, so that between the
// targets only the handlers differ.
func NewServer(h http.Handler) *http.Server {
	var c config.Config
	c.ApplyDefaults()
	l := c.Listen
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}
}

// BareProxy is the bare tuned ReverseProxy: to upstream with auth as the
// Authorization header, a pooled transport keeping maxConns idle
// connections, the gateway's buffer pool, no logging. Its transport is
// returned for CloseIdleConnections.
func BareProxy(upstream *url.URL, auth string, maxConns int) (*httputil.ReverseProxy, *http.Transport) {
	header := []string{auth}
	tr := PooledTransport(maxConns)
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.Header["Authorization"] = header
		},
		Transport:  tr,
		BufferPool: proxy.NewBufferPool(),
		ErrorLog:   slog.NewLogLogger(slog.DiscardHandler, slog.LevelWarn),
	}, tr
}

// PooledTransport is an http.Transport to one host that keeps maxConns
// idle connections (no proxy, 5 s dial timeout, 90 s idle timeout).
func PooledTransport(maxConns int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        maxConns,
		MaxIdleConnsPerHost: maxConns,
		IdleConnTimeout:     90 * time.Second,
	}
}

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which Linux fixes at 100 per second for user space.
const clockTick = 10 * time.Millisecond

// TreeCPU returns the user+system CPU time of the process pid and its
// direct children (nginx's master and workers).
func TreeCPU(pid int) (time.Duration, error) {
	_, user, sys, err := procTree(pid)
	return user + sys, err
}

// procTree finds the direct children of the process pid and adds up its
// and their utime and stime; pids holds pid first, then the children.
func procTree(pid int) (pids []int, user, sys time.Duration, err error) {
	user, sys, _, err = procTimes(pid)
	if err != nil {
		return nil, 0, 0, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, 0, 0, err
	}
	pids = []int{pid}
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil || child == pid {
			continue
		}
		u, s, ppid, err := procTimes(child)
		if err != nil || ppid != pid {
			continue // gone, or not a child
		}
		pids = append(pids, child)
		user += u
		sys += s
	}
	return pids, user, sys, nil
}

// ProcCPU reads utime+stime (all threads) and the parent pid from
// /proc/<pid>/stat.
func ProcCPU(pid int) (cpu time.Duration, ppid int, err error) {
	user, sys, ppid, err := procTimes(pid)
	return user + sys, ppid, err
}

// procTimes reads utime and stime (all threads) and the parent pid from
// /proc/<pid>/stat.
func procTimes(pid int) (user, sys time.Duration, ppid int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state)
	if len(f) < 13 {
		return 0, 0, 0, errors.New("short /proc stat")
	}
	ppid, err1 := strconv.Atoi(f[1])               // field 4
	utime, err2 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err3 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err := errors.Join(err1, err2, err3); err != nil {
		return 0, 0, 0, err
	}
	return time.Duration(utime) * clockTick, time.Duration(stime) * clockTick, ppid, nil
}

// Usage is what a process (or nginx's master and workers) used so far,
// from /proc: where its CPU time went, and how often its threads were
// switched out.
type Usage struct {
	User   time.Duration // utime, all threads
	System time.Duration // stime, all threads: the kernel's work for it
	// Switches is the context switches (voluntary and involuntary) of the
	// threads alive when it was read, from /proc/<pid>/task/*/status.
	// A thread that ended takes its count with it; Go's threads and
	// nginx's workers live as long as their process.
	Switches int64
}

// CPU is the user and system time together.
func (u Usage) CPU() time.Duration { return u.User + u.System }

// Sub is what was used between v and u (u read after v).
func (u Usage) Sub(v Usage) Usage {
	return Usage{User: u.User - v.User, System: u.System - v.System, Switches: u.Switches - v.Switches}
}

// ProcUsage reads the Usage of the process pid and its parent pid.
func ProcUsage(pid int) (Usage, int, error) {
	user, sys, ppid, err := procTimes(pid)
	if err != nil {
		return Usage{}, 0, err
	}
	switches, err := contextSwitches(pid)
	if err != nil {
		return Usage{}, 0, err
	}
	return Usage{User: user, System: sys, Switches: switches}, ppid, nil
}

// TreeUsage is ProcUsage of the process pid and its direct children
// (nginx's master and workers) added up.
func TreeUsage(pid int) (Usage, error) {
	pids, user, sys, err := procTree(pid)
	if err != nil {
		return Usage{}, err
	}
	u := Usage{User: user, System: sys}
	for i, p := range pids {
		n, err := contextSwitches(p)
		if err != nil {
			if i == 0 {
				return Usage{}, err
			}
			continue // a child that ended meanwhile
		}
		u.Switches += n
	}
	return u, nil
}

// contextSwitches sums voluntary_ctxt_switches and
// nonvoluntary_ctxt_switches over the threads of pid.
func contextSwitches(pid int) (int64, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var total int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/status")
		if err != nil {
			continue // the thread ended meanwhile
		}
		n, err := parseSwitches(b)
		if err != nil {
			return 0, fmt.Errorf("%s/%s/status: %w", dir, t.Name(), err)
		}
		total += n
	}
	return total, nil
}

// parseSwitches adds up the two context switch counts of a
// /proc/<pid>/task/<tid>/status.
func parseSwitches(status []byte) (int64, error) {
	var total int64
	found := 0
	for line := range bytes.Lines(status) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		switch string(name) {
		case "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches":
			n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: %w", name, err)
			}
			total += n
			found++
		}
	}
	if found != 2 {
		return 0, errors.New("no voluntary_ctxt_switches and nonvoluntary_ctxt_switches")
	}
	return total, nil
}

// FreePort returns a loopback address with a port that was free a moment
// ago.
func FreePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
