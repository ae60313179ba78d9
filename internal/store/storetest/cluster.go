package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// clusterSlots is the number of hash slots of a Redis Cluster.
const clusterSlots = 16384

// RedisCluster is a Redis Cluster of masters without replicas on loopback
// ports, owned by a test.
type RedisCluster struct {
	// Addrs are the masters' "127.0.0.1:port" addresses.
	Addrs []string
	// Nodes are the masters, in the order of Addrs.
	Nodes []*Redis
}

// StartRedisCluster starts n redis-servers in cluster mode, splits the
// hash slots evenly among them, joins them, and waits until every node
// reports cluster_state:ok. It skips tb if redis-server is not on PATH,
// and needs Redis 7 or later (CLUSTER ADDSLOTSRANGE, cluster-port).
func StartRedisCluster(tb testing.TB, n int) *RedisCluster {
	tb.Helper()
	c := &RedisCluster{}
	buses := make([]string, n)
	for i := range n {
		buses[i] = freePort(tb)
		r := newRedis(tb, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-port", buses[i], "--cluster-node-timeout", "5000")
		r.Start()
		c.Nodes, c.Addrs = append(c.Nodes, r), append(c.Addrs, r.Addr)
	}
	for i, r := range c.Nodes {
		first, last := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		c.must(r, "CLUSTER", "ADDSLOTSRANGE", fmt.Sprint(first), fmt.Sprint(last))
		if i > 0 {
			c.must(c.Nodes[0], "CLUSTER", "MEET", "127.0.0.1", r.port, buses[i])
		}
	}
	deadline := time.Now().Add(startTimeout)
	for _, r := range c.Nodes {
		for {
			info, err := r.command("CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("storetest: Redis Cluster node %s not ready after %s: %q, %v", r.Addr, startTimeout, info, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

// must sends a command to r and fails the test unless the reply is +OK.
func (c *RedisCluster) must(r *Redis, args ...string) {
	r.tb.Helper()
	if reply, err := r.command(args...); err != nil || reply != "+OK" {
		r.tb.Fatalf("storetest: %s on %s: %q, %v", strings.Join(args, " "), r.Addr, reply, err)
	}
}
