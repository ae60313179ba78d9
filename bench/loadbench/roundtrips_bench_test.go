package main

import (
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// BenchmarkProvisionRoundTrips counts the round trips between the gateway
// and a shared store per provision (as BenchmarkProvisionStores sends
// them, through one gateway): the store is reached through a TCP proxy
// that counts a round trip each time the gateway sends after the server
// answered, so a pipeline counts once and a Redis WAIT once more. It
// counts after a warm-up (the pool's connections and their prepared
// statements) and reports round-trips/op only: its timings are the
// proxy's as much as the store's. docs/performance.md cites it.
//
//	go test ./bench/loadbench -run XXX -bench ProvisionRoundTrips -benchtime 1000x
func BenchmarkProvisionRoundTrips(b *testing.B) {
	e, err := newEnv(1 << 10)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	// The servers are the whole benchmark's (b), each behind its counting
	// proxy, started on first use.
	var trips atomic.Int64
	via := func(addr string) string { return countTrips(b, addr, &trips) }
	var redis, primary, pg *store.Config
	for _, s := range []struct {
		name string
		cfg  func() store.Config
	}{
		{"redis", func() store.Config {
			if redis == nil {
				c := storetest.StartRedis(b).StoreConfig()
				c.Redis.Addrs[0] = via(c.Redis.Addrs[0])
				redis = &c
			}
			return *redis
		}},
		{"redis-acks-1", func() store.Config {
			if primary == nil {
				r := storetest.StartRedis(b)
				storetest.StartRedisReplica(b, r)
				c := r.StoreConfig()
				c.Redis.Addrs[0] = via(c.Redis.Addrs[0])
				c.Redis.ReplicaAcks, c.Redis.ReplicaAckTimeout = 1, time.Second
				primary = &c
			}
			return *primary
		}},
		{"postgres", func() store.Config {
			if pg == nil {
				srv := storetest.StartPostgres(b)
				url := strings.Replace(srv.URL(""), "@"+srv.Addr+"/", "@"+via(srv.Addr)+"/", 1)
				pg = &store.Config{Backend: store.BackendPostgres, Postgres: store.PostgresConfig{URL: url}}
			}
			return *pg
		}},
	} {
		b.Run(s.name, func(b *testing.B) {
			targets := storeGateways(b, e, s.cfg(), 1)
			// A warm-up: the pool's connections, their prepared statements.
			if _, err := sendProvisions(targets, 20*storeConcurrency); err != nil {
				b.Fatal(err)
			}
			before := trips.Load()
			b.ResetTimer()
			if _, err := sendProvisions(targets, b.N); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(trips.Load()-before)/float64(b.N), "round-trips/op")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// countTrips listens on a loopback port, forwards each connection to addr
// and counts in trips the client's sends that follow an answer (or open
// the connection); it returns its own address and stops when b ends.
func countTrips(b *testing.B, addr string, trips *atomic.Int64) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	b.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			mu.Unlock()
			var answered atomic.Bool
			answered.Store(true)
			wg.Go(func() { pump(server, client, func() { answered.Store(true) }) })
			wg.Go(func() {
				pump(client, server, func() {
					if answered.Swap(false) {
						trips.Add(1)
					}
				})
			})
		}
	})
	return ln.Addr().String()
}

// pump copies from src to dst, calling seen before each chunk it writes,
// and closes dst when src ends.
func pump(src, dst net.Conn, seen func()) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			seen()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // the end of src, or dst's end closed it
		}
	}
}
