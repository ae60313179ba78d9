package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// storeConcurrency is the platforms provisioning at once in
// BenchmarkProvisionStores.
const storeConcurrency = 16

// BenchmarkProvisionStores: synchronous provisions (each a new instance,
// so each takes and releases the instance's lock, and records it in the
// inventory) through 1 and 3 gateway replicas sharing one state store, 16
// platforms at once spread over the replicas, against the sample broker
// directly in the same run. It reports provisions/s and the p50 and p99
// a provision takes, and the p50 and p99 the gateway adds over the
// direct run's. memory and bolt are one process's (1 replica only); Redis
// with replica_acks 1 has a replica the writes wait for. The stores run on
// this machine (redis-server, PostgreSQL started by the test), so the
// figures are the gateway's and the store's CPU on 2 cores, not a network's.
// docs/performance.md cites them.
//
//	go test ./bench/loadbench -run XXX -bench ProvisionStores -benchtime 4000x
func BenchmarkProvisionStores(b *testing.B) {
	e, err := newEnv(1 << 10)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	direct := e.broker
	var directP50, directP99 time.Duration
	b.Run("direct", func(b *testing.B) {
		directP50, directP99 = runProvisions(b, []*target{direct})
	})
	var redis, primary *storetest.Redis
	var pg *storetest.Postgres
	stores := []struct {
		name     string
		replicas []int
		cfg      func(sub *testing.B) store.Config
	}{
		{"memory", []int{1}, func(*testing.B) store.Config { return store.Config{Backend: store.BackendMemory} }},
		{"bolt", []int{1}, func(sub *testing.B) store.Config {
			return store.Config{Backend: store.BackendBolt, Path: filepath.Join(sub.TempDir(), "state.db")}
		}},
		// The servers are the whole benchmark's (b), started on first use.
		{"redis", []int{1, 3}, func(*testing.B) store.Config {
			if redis == nil {
				redis = storetest.StartRedis(b)
			}
			return redis.StoreConfig()
		}},
		{"redis-acks-1", []int{1, 3}, func(*testing.B) store.Config {
			if primary == nil {
				primary = storetest.StartRedis(b)
				storetest.StartRedisReplica(b, primary)
			}
			c := primary.StoreConfig()
			c.Redis.ReplicaAcks, c.Redis.ReplicaAckTimeout = 1, time.Second
			return c
		}},
		{"postgres", []int{1, 3}, func(*testing.B) store.Config {
			if pg == nil {
				pg = storetest.StartPostgres(b)
			}
			return store.Config{Backend: store.BackendPostgres, Postgres: store.PostgresConfig{URL: pg.URL("")}}
		}},
	}
	for _, s := range stores {
		for _, n := range s.replicas {
			b.Run(fmt.Sprintf("%s/replicas=%d", s.name, n), func(b *testing.B) {
				cfg := s.cfg(b)
				targets := make([]*target, n)
				for i := range targets {
					if cfg.Backend == store.BackendMemory || cfg.Backend == store.BackendBolt {
						if i > 0 {
							b.Fatalf("%s is one process's store", cfg.Backend)
						}
					}
					st, err := backend.Open(cfg, time.Now)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { _ = st.Close() })
					gw, err := buildGateway(e.urls, observe{store: st})
					if err != nil {
						b.Fatal(err)
					}
					base, stop, err := serve("gateway", gw.handler)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { stop(); gw.close() })
					targets[i] = &target{name: "gateway", base: base + gatewayPath, header: platformHeader()}
				}
				p50, p99 := runProvisions(b, targets)
				b.ReportMetric(float64(p50-directP50)/1e3, "added-p50-µs")
				b.ReportMetric(float64(p99-directP99)/1e3, "added-p99-µs")
			})
		}
	}
}

// runProvisions sends b.N provisions from storeConcurrency workers, worker
// i to targets[i%len(targets)], and reports provisions/s, p50 and p99.
func runProvisions(b *testing.B, targets []*target) (p50, p99 time.Duration) {
	b.Helper()
	reqs := make([]func(context.Context, int, int64) (*http.Request, error), len(targets))
	for i, t := range targets {
		reqs[i] = provisionRequests(t)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: storeConcurrency, MaxConnsPerHost: storeConcurrency}}
	defer client.CloseIdleConnections()
	var next atomic.Int64
	var failed atomic.Int64
	var firstFailure atomic.Value
	lat := make([][]time.Duration, storeConcurrency)
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for w := range storeConcurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seq := int64(0); next.Add(1) <= int64(b.N); seq++ {
				req, err := reqs[w%len(reqs)](context.Background(), w, seq)
				if err != nil {
					failed.Add(1)
					continue
				}
				t0 := time.Now()
				res, err := client.Do(req)
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = bytes.NewBuffer(nil).ReadFrom(res.Body)
				res.Body.Close()
				if res.StatusCode != http.StatusCreated {
					if failed.Add(1) == 1 {
						firstFailure.Store(req.URL.Path + ": " + res.Status)
					}
					continue
				}
				lat[w] = append(lat[w], time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d provisions failed; the first: %v", n, b.N, firstFailure.Load())
	}
	all := slices.Concat(lat...)
	slices.Sort(all)
	p50, p99 = all[len(all)/2], all[len(all)*99/100]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "provisions/s")
	b.ReportMetric(float64(p50)/1e3, "p50-µs")
	b.ReportMetric(float64(p99)/1e3, "p99-µs")
	b.ReportMetric(0, "ns/op")
	return p50, p99
}
