package main

// -store redis -store-failover: two redis-servers, a primary and its
// replica, and a Sentinel (quorum 1) that the gateways ask for the
// primary (state.redis.master_name). Each server is known by its front
// (failover.go), so that the replica's replication connection to the
// primary passes through a link of its own, which the failover stalls so
// that the replica lags, and the gateways' connections through the store
// link that the other store faults degrade; Sentinel's pass untouched.

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// sentinelMaster is the name the Sentinel monitors the primary by.
const sentinelMaster = "osb"

// Sentinel's timing. A pause fault stops the primary up to 4 s, so
// Sentinel declares it down only after 6 s: a pause never becomes a
// failover the nemesis did not plan. The failover fault does not wait for
// that: it asks Sentinel to fail over (SENTINEL FAILOVER) right after the
// kill, as Sentinel does once the primary is down, so that a failover
// takes a second or two.
const (
	sentinelDownAfter       = 6 * time.Second
	sentinelFailoverTimeout = 5 * time.Second
)

// redisServer is one of the two servers: its process, its own address
// (addr), its directory and the front it is known by.
type redisServer struct {
	redisProc
	dir    string
	front  *front
	client *redis.Client // to addr, for the campaign's own looks
}

// redisFailover is the store of -store redis -store-failover.
type redisFailover struct {
	mu       sync.Mutex // one fault at a time; primary
	c        *cluster
	bin      string
	servers  [2]*redisServer
	primary  int // index into servers
	sentinel *redisProc
	sc       *redis.SentinelClient
	repl     *link // the replica's connection to its primary
	calm     *link // Sentinel's connections: never faulted
}

// startRedisFailover starts the servers, the replica in sync, and the
// Sentinel; c.storeLink becomes the gateways' link to whichever server is
// the primary, and c.redis the primary. It returns what has started even
// with an error, for stop.
func startRedisFailover(c *cluster, dir string) (*redisFailover, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server is not on PATH (Debian: apt-get install -y redis-server)")
	}
	r := &redisFailover{c: c, bin: bin}
	for _, l := range []**link{&c.storeLink, &r.repl, &r.calm} {
		if *l, err = newLink("link to redis", "127.0.0.1:1"); err != nil {
			return r, err
		}
	}
	r.repl.name, r.calm.name = "redis replication link", "link of Sentinel"
	route := func(src net.IP) *link {
		switch {
		case src.Equal(replicationSource):
			return r.repl
		case src.Equal(sentinelSource):
			return r.calm
		}
		return c.storeLink
	}
	for i, name := range []string{"redis-a", "redis-b"} {
		s := &redisServer{redisProc: redisProc{proc: proc{name: name}, addr: freeAddr()}, dir: filepath.Join(dir, name)}
		r.servers[i] = s
		if err := os.MkdirAll(s.dir, 0o755); err != nil {
			return r, err
		}
		if s.log, err = os.Create(filepath.Join(dir, name+".log")); err != nil {
			return r, err
		}
		if s.front, err = newFront(s.addr, route); err != nil {
			return r, err
		}
		s.client = redis.NewClient(&redis.Options{Addr: s.addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	}
	a, b := r.servers[0], r.servers[1]
	if err := a.start(bin, ""); err != nil {
		return r, err
	}
	if err := b.start(bin, a.front.Addr()); err != nil {
		return r, err
	}
	if err := r.startSentinel(dir, a.front.Addr()); err != nil {
		return r, err
	}
	c.redis = &a.redisProc
	return r, r.settled(b, a)
}

// start runs the server on its address, as the replica of the server at
// primary (a front's address) unless primary is empty, and waits until it
// answers PING. It announces its front as its address, and replicates
// from replicationSource.
func (s *redisServer) start(bin, primary string) error {
	_, port, _ := net.SplitHostPort(s.addr)
	_, announce, _ := net.SplitHostPort(s.front.Addr())
	args := []string{"--port", port, "--bind", "127.0.0.1", "--protected-mode", "no", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--bind-source-addr", replicationSource.String(), "--replica-announce-ip", "127.0.0.1",
		"--replica-announce-port", announce, "--repl-diskless-sync", "yes", "--repl-diskless-sync-delay", "0"}
	if primary != "" {
		host, port, _ := net.SplitHostPort(primary)
		args = append(args, "--replicaof", host, port)
	}
	if err := s.startCmd(bin, args...); err != nil {
		return err
	}
	err := waitReady(s.name, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return !s.running() || s.client.Ping(ctx).Err() == nil
	})
	if !s.running() {
		return fmt.Errorf("%s exited at start; see %s", s.name, s.log.Name())
	}
	if err == nil {
		s.up.Store(true)
	}
	return err
}

// replication is the server's INFO replication as a map.
func (s *redisServer) replication() map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	raw, err := s.client.Info(ctx, "replication").Result()
	out := map[string]string{}
	if err != nil {
		return out
	}
	for _, line := range strings.Split(raw, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			out[k] = v
		}
	}
	return out
}

func (r *redisFailover) startSentinel(dir, primary string) error {
	host, port, _ := net.SplitHostPort(primary)
	s := &redisProc{proc: proc{name: "sentinel"}, addr: freeAddr()}
	r.sentinel = s
	_, own, _ := net.SplitHostPort(s.addr)
	conf := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it
	text := fmt.Sprintf("port %s\nbind 127.0.0.1\nprotected-mode no\nbind-source-addr %s\ndir %q\n", own, sentinelSource, dir) +
		fmt.Sprintf("sentinel monitor %s %s %s 1\n", sentinelMaster, host, port) +
		fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", sentinelMaster, sentinelDownAfter.Milliseconds()) +
		fmt.Sprintf("sentinel failover-timeout %s %d\n", sentinelMaster, sentinelFailoverTimeout.Milliseconds())
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return err
	}
	var err error
	if s.log, err = os.Create(filepath.Join(dir, "sentinel.log")); err != nil {
		return err
	}
	if err := s.startCmd(r.bin, conf, "--sentinel"); err != nil {
		return err
	}
	r.sc = redis.NewSentinelClient(&redis.Options{Addr: s.addr, DialTimeout: time.Second, ReadTimeout: 2 * time.Second, MaxRetries: -1})
	return waitFor("sentinel to see the primary", time.Minute, func() bool { return r.master() == primary })
}

// master is the primary's address as Sentinel says ("" when it does not).
func (r *redisFailover) master() string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	a, err := r.sc.GetMasterAddrByName(ctx, sentinelMaster).Result()
	if err != nil || len(a) != 2 {
		return ""
	}
	return net.JoinHostPort(a[0], a[1])
}

// settled waits until replica replicates from primary, in sync, and
// Sentinel sees it as a healthy replica: a failover could promote it.
func (r *redisFailover) settled(replica, primary *redisServer) error {
	return waitFor(replica.name+" to replicate "+primary.name+" and Sentinel to see it", time.Minute, func() bool {
		in := replica.replication()
		if in["role"] != "slave" || in["master_link_status"] != "up" || in["master_port"] != portOf(primary.front.Addr()) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rs, err := r.sc.Replicas(ctx, sentinelMaster).Result()
		if err != nil {
			return false
		}
		for _, x := range rs {
			if net.JoinHostPort(x["ip"], x["port"]) == replica.front.Addr() {
				return x["flags"] == "slave" && x["master-link-status"] == "ok"
			}
		}
		return false
	})
}

func portOf(addr string) string {
	_, p, _ := net.SplitHostPort(addr)
	return p
}

// failover is the fault: the replica's link stalls for f.Latency (the
// writes of that time are on the primary alone), the primary is killed
// (kill -9, checked gone by PID and port), what the link held is lost
// with it, Sentinel promotes the lagging replica, and after f.For the old
// primary starts again, empty, as the replica of the new one (through the
// replication link), and the fault ends once it is in sync and Sentinel
// sees it.
func (r *redisFailover) failover(f *fault) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	old, next := r.servers[r.primary], r.servers[1-r.primary]
	defer lockServers(&r.servers[0].proc, &r.servers[1].proc)()
	f.Start = time.Now()
	r.repl.setStalled(true)
	defer r.repl.heal()
	time.Sleep(f.Latency)
	pid, err := old.kill9()
	f.PID = pid
	if err == nil {
		err = gone(pid, old.addr)
	}
	r.repl.cut(true) // the replica's connection, and what the link held for it
	r.repl.heal()
	if err != nil {
		return err
	}
	if err := r.promote(next); err != nil {
		// Nothing was promoted: the old primary comes back, empty.
		return errors.Join(err, old.start(r.bin, ""))
	}
	r.primary = 1 - r.primary
	r.c.redis = &next.redisProc
	f.Detail += ", " + next.name + " promoted"
	time.Sleep(f.For)
	if err := old.start(r.bin, next.front.Addr()); err != nil {
		return err
	}
	if f.NewPID = old.pid(); f.NewPID == pid {
		return fmt.Errorf("%s restarted as pid %d, killed pid %d", old.name, f.NewPID, pid)
	}
	return r.settled(old, next)
}

// promote asks Sentinel to fail over and waits until it names next as the
// primary and next says so itself. Should SENTINEL FAILOVER be refused,
// Sentinel still fails over once it sees the primary down.
func (r *redisFailover) promote(next *redisServer) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	ferr := r.sc.Failover(ctx, sentinelMaster).Err()
	cancel()
	err := waitFor("Sentinel to promote "+next.name, 30*time.Second, func() bool {
		return r.master() == next.front.Addr() && next.replication()["role"] == "master"
	})
	if err != nil && ferr != nil {
		return fmt.Errorf("%w (SENTINEL FAILOVER: %v)", err, ferr)
	}
	return err
}

// pause stops the primary (SIGSTOP) for f.For: the redis-sigstop fault,
// on whichever server is the primary, never during a failover.
func (r *redisFailover) pause(f *fault) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.servers[r.primary]
	defer lockServers(&p.proc)()
	f.Start = time.Now()
	f.Detail = p.name
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	time.Sleep(f.For)
	return p.signal(syscall.SIGCONT)
}

func (r *redisFailover) stop() {
	for _, s := range r.servers {
		if s == nil {
			continue
		}
		if s.cmd != nil {
			_ = s.signal(syscall.SIGCONT)
			_, _ = s.kill9()
		}
		if s.front != nil {
			s.front.Close()
		}
		if s.client != nil {
			_ = s.client.Close()
		}
	}
	if r.sentinel != nil && r.sentinel.cmd != nil {
		_, _ = r.sentinel.kill9()
	}
	if r.sc != nil {
		_ = r.sc.Close()
	}
	for _, l := range []*link{r.repl, r.calm} {
		if l != nil {
			l.Close()
		}
	}
}
