package main

// The cluster's processes: a child process (proc) and its start, signals
// and readiness, and the sample broker, Redis and gateway replicas built on
// it (PostgreSQL's is postgres.go's).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// proc is one running process, restartable.
type proc struct {
	name    string
	faultMu sync.Mutex // one kill-and-restart at a time (killAndRestart)
	mu      sync.Mutex
	cmd     *exec.Cmd
	done    chan struct{}
	up      atomic.Bool
	log     *os.File
	env     []string // added to the campaign's environment
}

func (p *proc) startCmd(bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
	if len(p.env) > 0 {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // nothing outlives the campaign
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	return nil
}

// kill9 kills the process with SIGKILL, waits for it to be gone and
// returns its PID; an error when it was not running (nothing was killed).
func (p *proc) kill9() (int, error) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return 0, fmt.Errorf("%s was never started", p.name)
	}
	p.up.Store(false)
	select {
	case <-done:
		return cmd.Process.Pid, fmt.Errorf("%s: pid %d had already exited: nothing to kill", p.name, cmd.Process.Pid)
	default:
	}
	_ = cmd.Process.Kill()
	<-done
	return cmd.Process.Pid, nil
}

// pid is the PID of the process last started (0: none).
func (p *proc) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// running reports whether the process last started still runs.
func (p *proc) running() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (p *proc) signal(s syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Signal(s)
}

// waitReady polls ready until it is true or a minute has passed.
func waitReady(what string, ready func() bool) error {
	deadline := time.Now().Add(time.Minute)
	for !ready() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after a minute", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return nil
}

// brokerProc is a sample broker process, its state on disk, behind a link.
type brokerProc struct {
	proc
	bin       string
	legacy    bool
	addr      string // its own listener
	link      *link  // the gateways' way to it
	stateFile string
	callLog   string
}

func (b *brokerProc) start() error {
	args := []string{"-addr", b.addr, "-username", brokerUser, "-password", brokerPassword,
		"-async-delay", "1s", "-state-file", b.stateFile, "-call-log", b.callLog, "-log-format", "json"}
	if b.legacy {
		args = append(args, "-legacy", "-lax")
	}
	for attempt := 0; ; attempt++ {
		if err := b.startCmd(b.bin, args...); err != nil {
			return err
		}
		err := waitReady("broker "+b.name, func() bool {
			select {
			case <-b.done:
				return true // exited: try again (its port may still be taken)
			default:
			}
			_, err := b.control(http.MethodGet, "stats", nil)
			return err == nil
		})
		select {
		case <-b.done:
			if attempt < 50 {
				time.Sleep(100 * time.Millisecond)
				continue
			}
			return fmt.Errorf("broker %s exited at start", b.name)
		default:
		}
		if err != nil {
			return err
		}
		b.up.Store(true)
		return nil
	}
}

// control calls the broker's control API: /_sample/<what>.
func (b *brokerProc) control(method, what string, body any) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = strings.NewReader(string(raw))
	}
	req, _ := http.NewRequest(method, "http://"+b.addr+"/_sample/"+what, rd)
	req.SetBasicAuth(brokerUser, brokerPassword)
	cl := &http.Client{Timeout: 5 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode >= 300 {
		return raw, fmt.Errorf("%s /_sample/%s: %d %s", method, what, res.StatusCode, raw)
	}
	return raw, nil
}

// holdings is what the broker holds (GET /_sample/holdings).
func (b *brokerProc) holdings() (instances, bindings []string, err error) {
	raw, err := b.control(http.MethodGet, "holdings", nil)
	if err != nil {
		return nil, nil, err
	}
	var h struct {
		Instances []string `json:"instances"`
		Bindings  []string `json:"bindings"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, nil, err
	}
	return h.Instances, h.Bindings, nil
}

type redisProc struct {
	proc
	addr string
}

func startRedis(dir string) (*redisProc, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on PATH (Debian: apt-get install -y redis-server)")
	}
	r := &redisProc{proc: proc{name: "redis"}, addr: freeAddr()}
	_, port, _ := net.SplitHostPort(r.addr)
	if r.log, err = os.Create(filepath.Join(dir, "redis.log")); err != nil {
		return nil, err
	}
	if err := r.startCmd(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir); err != nil {
		return nil, err
	}
	err = waitReady("redis", func() bool { return pings(r.addr) })
	r.up.Store(true)
	return r, err
}

// gatewayProc is one gateway replica.
type gatewayProc struct {
	proc
	i      int
	bin    string
	listen string
	admin  string
	config string
	// storeLink is this replica's own link to the store (to the shared
	// storeLink, which the store-wide faults degrade): a store-partition
	// cuts one replica off (faults_more.go). Nil with bolt.
	storeLink *link
	clockFile string // the offset file of its wall clock (clock.go)
}

func (g *gatewayProc) start() error {
	if err := g.startCmd(g.bin, "serve", "-config", g.config); err != nil {
		return err
	}
	err := waitReady(g.name, func() bool {
		select {
		case <-g.done:
			return true
		default:
		}
		res, err := http.Get("http://" + g.admin + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	select {
	case <-g.done:
		return fmt.Errorf("%s exited at start; see %s", g.name, g.log.Name())
	default:
	}
	if err == nil {
		g.up.Store(true)
	}
	return err
}

// adminGet GETs an admin API path into v.
func (g *gatewayProc) adminGet(path string, v any) error {
	req, _ := http.NewRequest(http.MethodGet, "http://"+g.admin+path, nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	cl := &http.Client{Timeout: 10 * time.Second}
	res, err := cl.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(res.Body)
		return fmt.Errorf("GET %s: %s %s", path, res.Status, raw)
	}
	return json.NewDecoder(res.Body).Decode(v)
}

// pings reports whether the Redis server at addr answers PING.
func pings(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	_, _ = c.Write([]byte("PING\r\n"))
	buf := make([]byte, 16)
	n, _ := c.Read(buf)
	return strings.HasPrefix(string(buf[:n]), "+PONG")
}
