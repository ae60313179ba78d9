package main

import (
	"crypto/rand"
	"encoding/base64"
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

// The cluster is every real process of a run: the sample brokers (each
// behind a link), Redis or PostgreSQL (behind a link) when the store is
// redis or postgres, and the gateway replicas the platforms call.
type cluster struct {
	dir        string
	gatewayBin string
	brokerBin  string
	store      string // bolt, redis or postgres
	keyFile    string
	redis      *redisProc
	postgres   *pgProc
	storeLink  *link // to Redis or PostgreSQL
	brokers    []*brokerProc
	gateways   []*gatewayProc
}

const (
	adminToken     = "campaign-admin-token"
	brokerUser     = "sample"
	brokerPassword = "sample-campaign-secret"
	brokerTimeout  = 4 * time.Second
	holdAfter      = 15 * time.Second
	orphanSchedule = "1s,2s,3s,5s,8s"
	// A failed catalog fetch is remembered (503 at once) for the retry
	// interval, doubling to the max: a fault on the broker's side that
	// ended up to catalogRetryMax ago still explains a 503.
	catalogRetry    = time.Second
	catalogRetryMax = 4 * time.Second
)

// tenants are the platforms' tenants; platform i is tenants[i%len].
var tenants = []string{"cf1", "cf2"}

func tenantPassword(t string) string { return t + "-campaign-secret" }

// build compiles the gateway and the sample broker into dir, or, when
// prebuilt names a directory, takes them from there.
func build(dir, prebuilt string) (gateway, broker string, err error) {
	gateway, broker = filepath.Join(dir, "osb-gateway"), filepath.Join(dir, "osb-sample-broker")
	for bin, pkg := range map[string]string{gateway: "./cmd/osb-gateway", broker: "./cmd/osb-sample-broker"} {
		if prebuilt != "" {
			if err := copyFile(filepath.Join(prebuilt, filepath.Base(bin)), bin); err != nil {
				return "", "", err
			}
			continue
		}
		cmd := exec.Command("go", "build", "-o", bin, pkg)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return gateway, broker, nil
}

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
	name string
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	up   atomic.Bool
	log  *os.File
}

func (p *proc) startCmd(bin string, args ...string) error {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = p.log, p.log
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

// kill9 kills the process with SIGKILL and waits for it to be gone.
func (p *proc) kill9() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	p.up.Store(false)
	_ = cmd.Process.Kill()
	<-done
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
	err = waitReady("redis", func() bool {
		c, err := net.DialTimeout("tcp", r.addr, time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		_, _ = c.Write([]byte("PING\r\n"))
		buf := make([]byte, 16)
		n, _ := c.Read(buf)
		return strings.HasPrefix(string(buf[:n]), "+PONG")
	})
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

// newCluster starts brokers, Redis or PostgreSQL, and replicas gateways in dir.
func newCluster(dir, store string, replicas int, prebuilt string) (_ *cluster, err error) {
	c := &cluster{dir: dir, store: store}
	defer func() {
		if err != nil {
			c.stop() // what started, and PostgreSQL's data directory
		}
	}()
	if c.gatewayBin, c.brokerBin, err = build(dir, prebuilt); err != nil {
		return nil, err
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	c.keyFile = filepath.Join(dir, "inventory.keys")
	if err := os.WriteFile(c.keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		return nil, err
	}
	for _, spec := range []struct {
		name   string
		legacy bool
	}{{"modern", false}, {"legacy", true}} {
		b := &brokerProc{proc: proc{name: "broker " + spec.name}, bin: c.brokerBin, legacy: spec.legacy, addr: freeAddr(),
			stateFile: filepath.Join(dir, spec.name+".state"), callLog: filepath.Join(dir, spec.name+".calls")}
		b.proc.name = spec.name
		if b.log, err = os.Create(filepath.Join(dir, spec.name+".log")); err != nil {
			return nil, err
		}
		if err := b.start(); err != nil {
			return nil, err
		}
		if b.link, err = newLink("link to "+spec.name, b.addr); err != nil {
			return nil, err
		}
		c.brokers = append(c.brokers, b)
	}
	state := fmt.Sprintf("{backend: bolt, path: %q, operation_deadline: 2m, sweep_interval: 1s, reconcile: {after: 5s, every: 5s}}", filepath.Join(dir, "state.db"))
	if store == "redis" {
		if c.redis, err = startRedis(dir); err != nil {
			return nil, err
		}
		if c.storeLink, err = newLink("link to redis", c.redis.addr); err != nil {
			return nil, err
		}
		state = fmt.Sprintf("{backend: redis, redis: {addrs: [%q]}, operation_deadline: 2m, sweep_interval: 1s, reconcile: {after: 5s, every: 5s}}", c.storeLink.Addr())
	}
	if store == "postgres" {
		if c.postgres, err = startPostgres(dir); err != nil {
			return nil, err
		}
		if c.storeLink, err = newLink("link to postgres", c.postgres.addr); err != nil {
			return nil, err
		}
		state = fmt.Sprintf("{backend: postgres, postgres: {url: %q}, operation_deadline: 2m, sweep_interval: 1s, reconcile: {after: 5s, every: 5s}}", c.postgres.url(c.storeLink.Addr()))
	}
	for i := range replicas {
		g := &gatewayProc{proc: proc{name: fmt.Sprintf("gw%d", i)}, i: i, bin: c.gatewayBin, listen: freeAddr(), admin: freeAddr()}
		g.config = filepath.Join(dir, g.name+".yaml")
		if err := os.WriteFile(g.config, []byte(c.gatewayYAML(g, state)), 0o600); err != nil {
			return nil, err
		}
		if g.log, err = os.Create(filepath.Join(dir, g.name+".log")); err != nil {
			return nil, err
		}
		if err := g.start(); err != nil {
			return nil, err
		}
		c.gateways = append(c.gateways, g)
	}
	return c, nil
}

func (c *cluster) gatewayYAML(g *gatewayProc, state string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "listen: {address: %q}\nadmin: {address: %q, token: %q}\nstate: %s\n", g.listen, g.admin, adminToken, state)
	fmt.Fprintf(&b, "log: {format: json, level: warn}\ninventory: {key_file: %q}\nbrokers:\n", c.keyFile)
	common := fmt.Sprintf("username: %s, password: %s, timeout: %s, hold_after_timeout: %s, orphan_mitigation: mitigate, orphan_schedule: %q, "+
		"catalog: {retry_interval: %s, retry_max_interval: %s}",
		brokerUser, brokerPassword, brokerTimeout, holdAfter, orphanSchedule, catalogRetry, catalogRetryMax)
	for _, br := range c.brokers {
		if br.legacy {
			fmt.Fprintf(&b, "  - {name: %s, url: \"http://%s\", %s, api_version: {min: \"2.0\", max: \"2.8\"}, inventory: {secrets: encrypted},\n"+
				"     emulate: {fetch: true, async_after: 2s, idempotent: true, gone: true}}\n", br.name, br.link.Addr(), common)
		} else {
			fmt.Fprintf(&b, "  - {name: %s, url: \"http://%s\", %s}\n", br.name, br.link.Addr(), common)
		}
	}
	b.WriteString("tenants:\n")
	for _, t := range tenants {
		fmt.Fprintf(&b, "  - {name: %s, credentials: [{username: %s, password: %s}], routes: [", t, t, tenantPassword(t))
		for i, br := range c.brokers {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "{broker: %s}", br.name)
		}
		b.WriteString("]}\n")
	}
	return b.String()
}

// pick is the replica a platform's next call goes to: a random one that is
// up, as a load balancer with health checks would choose.
func (c *cluster) pick(rng interface{ IntN(int) int }) int {
	var up []int
	for i, g := range c.gateways {
		if g.up.Load() {
			up = append(up, i)
		}
	}
	if len(up) == 0 {
		return rng.IntN(len(c.gateways))
	}
	return up[rng.IntN(len(up))]
}

func (c *cluster) platformAddr(i int) string { return c.gateways[i].listen }

// stop ends every process.
func (c *cluster) stop() {
	for _, g := range c.gateways {
		g.kill9()
	}
	for _, b := range c.brokers {
		b.kill9()
		b.link.Close()
	}
	if c.redis != nil {
		_ = c.redis.signal(syscall.SIGCONT)
		c.redis.kill9()
	}
	if c.postgres != nil {
		c.postgres.stop()
	}
	if c.storeLink != nil {
		c.storeLink.Close()
	}
}

func copyFile(from, to string) error {
	raw, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, raw, 0o755)
}
