package storetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// StartRedisReplica starts a redis-server for tb that replicates primary
// (--replicaof), and waits until primary counts it among its connected
// replicas with its link up. Pause it to make the primary's WAIT time out,
// as a replica that lags or is cut off does.
func StartRedisReplica(tb testing.TB, primary *Redis) *Redis {
	tb.Helper()
	host, port := "127.0.0.1", primary.port
	r := newRedis(tb, "--replicaof", host, port)
	r.Start()
	deadline := time.Now().Add(startTimeout)
	for {
		info, err := primary.command("INFO", "replication")
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "port="+r.port+",state=online") {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("storetest: replica %s of %s not online after %s (last: %q, %v):\n%s", r.Addr, primary.Addr, startTimeout, info, err, r.out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// SentinelMaster is the name StartRedisSentinel's Sentinel monitors the
// primary by (store.RedisConfig.MasterName).
const SentinelMaster = "osb"

// StartRedisSentinel starts a Sentinel for tb (redis-server --sentinel)
// that monitors primary as SentinelMaster with a quorum of 1, and waits
// until it knows the primary and the replicas primary has now. A test
// fails the primary over with Command("SENTINEL", "FAILOVER", SentinelMaster).
func StartRedisSentinel(tb testing.TB, primary *Redis) *Redis {
	tb.Helper()
	r := newRedis(tb, "--sentinel")
	r.conf = filepath.Join(r.dir, "sentinel.conf") // Sentinel rewrites it
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %s 1\nsentinel down-after-milliseconds %[1]s 5000\nsentinel failover-timeout %[1]s 5000\n",
		SentinelMaster, primary.port)
	if err := os.WriteFile(r.conf, []byte(conf), 0o600); err != nil {
		tb.Fatalf("storetest: write %s: %v", r.conf, err)
	}
	r.Start()
	info, _ := primary.command("INFO", "replication")
	want := strings.Count(info, ",state=online")
	deadline := time.Now().Add(startTimeout)
	for {
		reply, err := r.command("INFO", "sentinel")
		if err == nil && strings.Contains(reply, "status=ok") && strings.Contains(reply, fmt.Sprintf("slaves=%d,", want)) {
			return r
		}
		if time.Now().After(deadline) {
			tb.Fatalf("storetest: sentinel %s does not see %s and its %d replicas after %s (last: %q, %v):\n%s",
				r.Addr, primary.Addr, want, startTimeout, reply, err, r.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Command sends one command to the server and returns its reply: a bulk
// string's content, else the first line of the reply ("+OK", "-ERR ...").
func (r *Redis) Command(args ...string) (string, error) { return r.command(args...) }
