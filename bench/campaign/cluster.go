package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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

	failover storeFailover // -store-failover: a primary and a replica (failover.go)
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

// build compiles the gateway (with the build tags tags: the campaign's
// own, baseTags, and a mutation's) and the sample broker into dir, or, when
// prebuilt names a directory, takes them from there (a gateway with more
// tags than baseTags is always built).
func build(dir, prebuilt, tags string) (gateway, broker string, err error) {
	gateway, broker = filepath.Join(dir, "osb-gateway"), filepath.Join(dir, "osb-sample-broker")
	for bin, pkg := range map[string]string{gateway: "./cmd/osb-gateway", broker: "./cmd/osb-sample-broker"} {
		mutated := tags != baseTags && bin == gateway
		if prebuilt != "" && !mutated {
			if err := copyFile(filepath.Join(prebuilt, filepath.Base(bin)), bin); err != nil {
				return "", "", err
			}
			continue
		}
		args := []string{"build", "-o", bin}
		if bin == gateway && tags != "" {
			args = append(args, "-tags", tags)
		}
		cmd := exec.Command("go", append(args, pkg)...)
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			return "", "", fmt.Errorf("go build %s: %w", pkg, err)
		}
	}
	return gateway, broker, nil
}

// newCluster starts brokers, Redis or PostgreSQL, and replicas gateways in dir.
func newCluster(dir, store string, replicas int, prebuilt, tags string, st storeOpts) (_ *cluster, err error) {
	c := &cluster{dir: dir, store: store}
	defer func() {
		if err != nil {
			c.stop() // what started, and PostgreSQL's data directory
		}
	}()
	if c.gatewayBin, c.brokerBin, err = build(dir, prebuilt, tags); err != nil {
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
	if st.failover {
		if state, err = c.startFailover(dir, st); err != nil {
			return nil, err
		}
	}
	if store == "redis" && !st.failover {
		if c.redis, err = startRedis(dir); err != nil {
			return nil, err
		}
		if c.storeLink, err = newLink("link to redis", c.redis.addr); err != nil {
			return nil, err
		}
		state = fmt.Sprintf("{backend: redis, redis: {addrs: [%q]}, operation_deadline: 2m, sweep_interval: 1s, reconcile: {after: 5s, every: 5s}}", c.storeLink.Addr())
	}
	if store == "postgres" && !st.failover {
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
		gstate, err := c.ownLinks(g, state) // faults_more.go
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(g.config, []byte(c.gatewayYAML(g, gstate)), 0o600); err != nil {
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
		if g.storeLink != nil {
			g.storeLink.Close()
		}
	}
	for _, b := range c.brokers {
		b.kill9()
		b.link.Close()
	}
	if c.failover != nil {
		c.failover.stop()
		c.redis, c.postgres = nil, nil
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
