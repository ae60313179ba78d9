package storetest

import (
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
