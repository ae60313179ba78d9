package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
// direct run's; and the CPU time a provision costs (this process's and
// every process it started: the stores' servers), and what the gateway
// and its store add to the direct run's. memory and bolt are one
// process's (1 replica only); Redis with replica_acks 1 has a replica the
// writes wait for. The stores run on this machine (redis-server,
// PostgreSQL started by the test), so the figures are the gateway's and
// the store's CPU on 2 cores, not a network's: with 16 provisions in
// flight the cores are busy, and a provision's latency follows the CPU it
// costs. The machine's other load slows a run but hardly changes its CPU
// per provision. docs/performance.md cites them.
//
//	go test ./bench/loadbench -run XXX -bench ProvisionStores -benchtime 4000x
func BenchmarkProvisionStores(b *testing.B) {
	e, err := newEnv(1 << 10)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	direct := e.broker
	var directP50, directP99, directCPU time.Duration
	b.Run("direct", func(b *testing.B) {
		directP50, directP99, directCPU = runProvisions(b, []*target{direct})
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
				targets := storeGateways(b, e, s.cfg(b), n)
				p50, p99, cpu := runProvisions(b, targets)
				b.ReportMetric(float64(p50-directP50)/1e3, "added-p50-µs")
				b.ReportMetric(float64(p99-directP99)/1e3, "added-p99-µs")
				b.ReportMetric(float64(cpu-directCPU)/1e3, "added-cpu-µs")
			})
		}
	}
}

// storeGateways starts n gateways, each with a store of its own opened by
// cfg, and returns them as targets; they stop when b ends.
func storeGateways(b *testing.B, e *env, cfg store.Config, n int) []*target {
	b.Helper()
	if n > 1 && (cfg.Backend == store.BackendMemory || cfg.Backend == store.BackendBolt) {
		b.Fatalf("%s is one process's store", cfg.Backend)
	}
	targets := make([]*target, n)
	for i := range targets {
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
	return targets
}

// runProvisions sends b.N provisions (sendProvisions) and reports
// provisions/s, p50, p99 and the CPU time per provision (treeCPU).
func runProvisions(b *testing.B, targets []*target) (p50, p99, cpu time.Duration) {
	b.Helper()
	cpu0 := treeCPU(b)
	b.ResetTimer()
	start := time.Now()
	all, err := sendProvisions(targets, b.N)
	elapsed := time.Since(start)
	b.StopTimer()
	cpu = (treeCPU(b) - cpu0) / time.Duration(b.N)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(all)
	p50, p99 = all[len(all)/2], all[len(all)*99/100]
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "provisions/s")
	b.ReportMetric(float64(p50)/1e3, "p50-µs")
	b.ReportMetric(float64(p99)/1e3, "p99-µs")
	b.ReportMetric(float64(cpu)/1e3, "cpu-µs")
	b.ReportMetric(0, "ns/op")
	return p50, p99, cpu
}

// sendProvisions sends n provisions from storeConcurrency workers, worker
// i to targets[i%len(targets)], and returns how long each took; its error
// says how many failed, and the first.
func sendProvisions(targets []*target, n int) ([]time.Duration, error) {
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
	for w := range storeConcurrency {
		wg.Go(func() {
			for seq := int64(0); next.Add(1) <= int64(n); seq++ {
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
		})
	}
	wg.Wait()
	if k := failed.Load(); k > 0 {
		return nil, fmt.Errorf("%d of %d provisions failed; the first: %v", k, n, firstFailure.Load())
	}
	return slices.Concat(lat...), nil
}

// treeCPU is the CPU time this process and every process under it (the
// stores' servers and their backends) have used: this process's from
// getrusage, the others' from /proc/<pid>/task/*/schedstat (nanoseconds,
// where /proc/<pid>/stat counts 10 ms ticks).
func treeCPU(b *testing.B) time.Duration {
	b.Helper()
	self, err := cpuTime(nil)
	if err != nil {
		b.Fatal(err)
	}
	parent := map[int][]int{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
		raw, err := os.ReadFile(f)
		i := bytes.LastIndexByte(raw, ')')
		if err != nil || i < 0 {
			continue // gone
		}
		if fields := strings.Fields(string(raw[i+1:])); len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			parent[ppid] = append(parent[ppid], pid)
		}
	}
	total := self
	for todo := parent[os.Getpid()]; len(todo) > 0; todo = todo[1:] {
		pid := todo[0]
		todo = append(todo, parent[pid]...)
		tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/[0-9]*/schedstat")
		for _, t := range tasks {
			raw, _ := os.ReadFile(t)
			if f := strings.Fields(string(raw)); len(f) > 0 {
				ns, _ := strconv.ParseInt(f[0], 10, 64)
				total += time.Duration(ns)
			}
		}
	}
	return total
}
