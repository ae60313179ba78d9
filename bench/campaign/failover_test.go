package main

import (
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
)

// TestFailoversOnlyWithStoreFailover: the plan draws failovers only with
// -store-failover; they come on top of the seed's schedule, which stays as
// it was, one every -failover-every on average, on the store.
func TestFailoversOnlyWithStoreFailover(t *testing.T) {
	brokers := []string{"modern", "legacy"}
	for _, store := range []string{"bolt", "redis", "postgres"} {
		s := plan(3, 20*time.Minute, store, 2, 4, brokers, 2500*time.Millisecond)
		for _, f := range withFailovers(s, 3, 20*time.Minute, store, storeOpts{every: 45 * time.Second}) {
			if f.Kind == fStoreFailover {
				t.Fatalf("%s without -store-failover: %s", store, f)
			}
		}
	}
	for _, store := range []string{"redis", "postgres"} {
		base := plan(3, 20*time.Minute, store, 2, 4, brokers, 2500*time.Millisecond)
		var was []string
		for _, f := range base {
			was = append(was, f.String()[strings.Index(f.String(), " at "):])
		}
		got := withFailovers(base, 3, 20*time.Minute, store, storeOpts{failover: true, every: 45 * time.Second})
		var rest []string
		failovers := 0
		for i, f := range got {
			if f.N != i+1 || (i > 0 && f.At < got[i-1].At) {
				t.Fatalf("%s: fault %d of the schedule is numbered %d at +%s after +%s", store, i+1, f.N, f.At, got[max(i-1, 0)].At)
			}
			if f.Kind != fStoreFailover {
				rest = append(rest, f.String()[strings.Index(f.String(), " at "):])
				continue
			}
			failovers++
			if f.Target != store || f.For <= 0 || (store == "redis") != (f.Latency > 0) {
				t.Errorf("%s: %s: want target %s, a down time, and a lag on redis only", store, f, store)
			}
		}
		if !slices.Equal(rest, was) {
			t.Errorf("%s: the rest of the schedule changed with -store-failover", store)
		}
		if failovers < 20 || failovers > 30 {
			t.Errorf("%s: %d failovers in 20 minutes, one every 45 s on average: want 20 to 30", store, failovers)
		}
	}
}

// TestStoreOptsCheck: -replica-acks needs replicas, -store-failover a
// shared store.
func TestStoreOptsCheck(t *testing.T) {
	for _, c := range []struct {
		store string
		st    storeOpts
		ok    bool
	}{
		{"redis", storeOpts{failover: true, every: time.Minute, acks: 1}, true},
		{"redis", storeOpts{failover: true, every: time.Minute}, true},
		{"postgres", storeOpts{failover: true, every: time.Minute}, true},
		{"bolt", storeOpts{}, true},
		{"bolt", storeOpts{failover: true, every: time.Minute}, false},
		{"redis", storeOpts{acks: 1}, false},
		{"postgres", storeOpts{failover: true, every: time.Minute, acks: 1}, false},
		{"redis", storeOpts{failover: true}, false},
		{"redis", storeOpts{failover: true, every: time.Minute, acks: -1}, false},
	} {
		if err := c.st.check(c.store); (err == nil) != c.ok {
			t.Errorf("-store %s %+v: %v, want ok %v", c.store, c.st, err, c.ok)
		}
	}
}

// TestFailoverGatewayYAML: the gateways' configuration of -store-failover
// is one the gateway loads, with Sentinel's address and master name and
// the replica acknowledgements asked for, or both PostgreSQL servers in
// one URL that follows the primary.
func TestFailoverGatewayYAML(t *testing.T) {
	dir := t.TempDir()
	c := &cluster{keyFile: filepath.Join(dir, "inventory.keys")}
	if err := os.WriteFile(c.keyFile, []byte("MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, legacy := range []bool{false, true} {
		l, err := newLink("test", "127.0.0.1:1")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		name := map[bool]string{false: "modern", true: "legacy"}[legacy]
		c.brokers = append(c.brokers, &brokerProc{proc: proc{name: name}, legacy: legacy, link: l})
	}
	g := &gatewayProc{proc: proc{name: "gw0"}, listen: "127.0.0.1:8080", admin: "127.0.0.1:8081"}
	load := func(state string) config.State {
		t.Helper()
		cfg, err := config.Parse([]byte(c.gatewayYAML(g, state)), config.Options{BaseDir: dir})
		if err != nil {
			t.Fatalf("%s: %v", state, err)
		}
		return cfg.State
	}
	s := load(failoverState("redis", "127.0.0.1:26379", 1))
	if s.Backend != "redis" || !slices.Equal(s.Redis.Addrs, []string{"127.0.0.1:26379"}) || s.Redis.MasterName != sentinelMaster ||
		s.Redis.ReplicaAcks != 1 || s.Redis.ReplicaAckTimeout != replicaAckTimeout {
		t.Errorf("redis, acks 1: %+v", s.Redis)
	}
	if s := load(failoverState("redis", "127.0.0.1:26379", 0)); s.Redis.MasterName != sentinelMaster || s.Redis.ReplicaAcks != 0 {
		t.Errorf("redis, acks 0: %+v", s.Redis)
	}
	p := &pgFailover{}
	for i, addr := range []string{"127.0.0.1:5001", "127.0.0.1:5002"} {
		fr := &front{ln: fixedAddr(addr)}
		p.servers[i] = &pgServer{front: fr}
	}
	s = load(failoverState("postgres", p.url(), 0))
	u := s.Postgres.URL.Reveal()
	if s.Backend != "postgres" || !strings.Contains(u, "@127.0.0.1:5001,127.0.0.1:5002/") || !strings.Contains(u, "target_session_attrs=read-write") {
		t.Errorf("postgres URL %q: want both servers and target_session_attrs=read-write", u)
	}
}

// fixedAddr is a listener that only tells its address.
type fixedAddr string

func (a fixedAddr) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (a fixedAddr) Close() error              { return nil }
func (a fixedAddr) Addr() net.Addr            { x, _ := net.ResolveTCPAddr("tcp", string(a)); return x }

// TestFrontRoutesBySource: a front passes each connection through the
// link its source address picks: a stall of the replication link holds
// the replica's bytes and no one else's, and its cut resets them.
func TestFrontRoutesBySource(t *testing.T) {
	echo := echoServer(t)
	var (
		links [2]*link
		err   error
	)
	for i := range links {
		if links[i], err = newLink("test", "127.0.0.1:1"); err != nil {
			t.Fatal(err)
		}
		defer links[i].Close()
	}
	gateways, repl := links[0], links[1]
	fr, err := newFront(echo.Addr().String(), func(src net.IP) *link {
		if src.Equal(replicationSource) {
			return repl
		}
		return gateways
	})
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	dial := func(src net.IP) net.Conn {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
		c, err := d.Dial("tcp", fr.Addr())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	roundTrip := func(c net.Conn, within time.Duration) error {
		_ = c.SetDeadline(time.Now().Add(within))
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 4)
		_, err := io.ReadFull(c, buf)
		return err
	}
	gw, rep := dial(net.IPv4(127, 0, 0, 1)), dial(replicationSource)
	defer gw.Close()
	defer rep.Close()
	if err := roundTrip(rep, 10*time.Second); err != nil {
		t.Fatalf("the replica's connection before the stall: %v", err)
	}
	repl.setStalled(true)
	if err := roundTrip(gw, 10*time.Second); err != nil {
		t.Errorf("a gateway's connection while the replication link stalls: %v", err)
	}
	if err := roundTrip(rep, 300*time.Millisecond); err == nil {
		t.Errorf("the replica's connection passed a stalled replication link")
	}
	repl.cut(true)
	repl.heal()
	_ = rep.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := rep.Read(make([]byte, 4)); err == nil {
		t.Errorf("the replica's connection read the bytes the cut link held")
	}
}

// TestCheckerExcusesAFailover: a failover, as it really happened, excuses
// a 503 that blames the store and a lock that blocked past its bound (a
// lost release); one that failed excuses nothing.
func TestCheckerExcusesAFailover(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault *fault
		want  string
	}{
		{"a failover", &fault{Kind: fStoreFailover, Target: "redis", Start: at(17), End: at(22)}, ""},
		{"a failover that failed", &fault{Kind: fStoreFailover, Target: "redis", Start: at(17), End: at(22), Err: "not promoted"}, "d,c"},
		{"a failover long before", &fault{Kind: fStoreFailover, Target: "redis", Start: at(1), End: at(5)}, "d,c"},
	} {
		v := newVerdict()
		v.faults = []*fault{c.fault}
		v.ops = []*op{{ID: 1, Kind: "provision", Broker: "modern", Instance: "i1", Start: at(20), End: at(21), Status: 503,
			Desc: "the gateway's operation state is unavailable"}}
		v.audit = []*seenLock{{adminLock: adminLock{Kind: "update", Broker: "modern", InstanceID: "i2", Started: at(20)}, Last: at(80)}}
		v.check5xx()
		v.checkLockAges()
		if got := rules(v); got != c.want {
			t.Errorf("%s: rules %q, want %q", c.name, got, c.want)
		}
	}
}

// echoServer is a loopback server that sends back what each connection
// sends it, closed when t ends.
func echoServer(t *testing.T) net.Listener {
	t.Helper()
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { echo.Close() })
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	return echo
}
