// This file is the load generator: N goroutines, each on its own keep-alive
// connection, send one request (or one made per call) over and over for a warm-up and then a
// measured period, and record status, latency and the process's CPU time.

package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/pprof"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// spec is what one load run needs: where to send, how hard and how long.
type spec struct {
	url     string      // absolute URL of the request
	header  http.Header // sent with every request; never modified
	conns   int         // concurrent connections (one goroutine each)
	warmup  time.Duration
	measure time.Duration
	// extraCPU, when not nil, returns CPU time used so far outside this
	// process (nginx); it is sampled at both ends of the measured period.
	extraCPU func() (time.Duration, error)
	// upstream, when not nil, returns how many catalog requests the broker
	// behind the target has received so far; it is sampled at both ends of
	// the measured period.
	upstream func() int64
	// tls, when not nil, is the client TLS configuration (https URLs).
	tls *tls.Config
	// newRequest, when not nil, makes each request instead of GET url with
	// header: worker is the connection's index, seq counts its requests.
	newRequest func(ctx context.Context, worker int, seq int64) (*http.Request, error)
	// status is the answer counted as a success; zero: 200.
	status int
	// side, when not nil, is started before the warm-up and stopped after
	// the measured period: load from elsewhere that the run is measured
	// beside (auth-flood's wrong passwords). Its mark function is called
	// when the measured period starts; what its stop function returns (its
	// figures since mark) goes to sample.flood.
	side func(ctx context.Context) (mark func(), stop func() *floodStats)
}

// sample is what one load run measured.
type sample struct {
	requests int64            // successful (spec.status) answers completed in the measured period
	errors   map[string]int64 // other outcomes by description ("status 412", transport errors)
	elapsed  time.Duration    // length of the measured period
	cpu      time.Duration    // user+system CPU of this process (and extraCPU) in the period
	allocs   uint64           // heap allocations of this process in the period
	bytes    uint64           // heap bytes allocated by this process in the period
	io       procIO           // read and write system calls of this process in the period
	hist     histogram        // latency of the successful answers
	// upstream counts the catalog requests the broker behind the target
	// received in the period; counted says whether it was counted at all.
	upstream int64
	counted  bool
	// rounds is the throughput of each round merged by add, in order, and
	// roundP99 each round's p99 latency in microseconds.
	rounds   []float64
	roundP99 []float64
	// flood is what spec.side sent and got back, when there was one.
	flood *floodStats
}

// add merges o into s, for a cell measured in several rounds.
func (s *sample) add(o *sample) {
	if o.elapsed > 0 {
		s.rounds = append(s.rounds, float64(o.requests)/o.elapsed.Seconds())
		s.roundP99 = append(s.roundP99, us(o.hist.quantile(0.99)))
	}
	if o.flood != nil {
		if s.flood == nil {
			s.flood = &floodStats{}
		}
		s.flood.merge(o.flood)
	}
	s.requests += o.requests
	s.elapsed += o.elapsed
	s.cpu += o.cpu
	s.allocs += o.allocs
	s.bytes += o.bytes
	s.io = s.io.plus(o.io)
	s.upstream += o.upstream
	s.counted = s.counted || o.counted
	s.hist.merge(&o.hist)
	for k, v := range o.errors {
		if s.errors == nil {
			s.errors = map[string]int64{}
		}
		s.errors[k] += v
	}
}

// Phases of a run, read by every worker after each request.
const (
	phaseWarmup int32 = iota
	phaseMeasure
	phaseStop
)

// worker is one connection's loop and the tallies it keeps, merged after
// the run so the hot loop shares nothing but the phase.
type worker struct {
	requests int64
	errors   map[string]int64
	hist     histogram
}

// load runs r and returns what it measured. Workers carry the pprof label
// role=load, so a CPU profile can leave the load generator out.
func load(ctx context.Context, r spec) (*sample, error) {
	tr := &http.Transport{
		Proxy:               nil,
		MaxIdleConns:        r.conns,
		MaxIdleConnsPerHost: r.conns,
		MaxConnsPerHost:     r.conns,
		DisableCompression:  true,
		IdleConnTimeout:     time.Minute,
		// With a TLS configuration of its own and no ForceAttemptHTTP2 the
		// transport speaks HTTP/1.1, one keep-alive connection per worker.
		TLSClientConfig: r.tls,
	}
	defer tr.CloseIdleConnections()
	runtime.GC() // garbage of the previous run is not billed to this one

	var phase, warm atomic.Int32
	workers := make([]*worker, r.conns)
	var wg sync.WaitGroup
	pprof.Do(ctx, pprof.Labels("role", "load"), func(ctx context.Context) {
		for i := range workers {
			w := &worker{}
			workers[i] = w
			wg.Go(func() { w.loop(ctx, tr, r, i, &phase, &warm) })
		}
	})

	var markSide func()
	var stopSide func() *floodStats
	if r.side != nil {
		markSide, stopSide = r.side(ctx)
	}
	stop := func() {
		phase.Store(phaseStop)
		wg.Wait()
		if stopSide != nil {
			stopSide()
		}
	}
	if err := sleep(ctx, r.warmup); err != nil {
		stop()
		return nil, err
	}
	// Every worker's connection is open (and its TLS handshake made)
	// before the measured period, however long a loaded machine takes:
	// the warm-up waits for each worker's first answer, for at most
	// warmupWait more (a dead target answers no one; its errors count).
	for deadline := time.Now().Add(warmupWait); warm.Load() < int32(r.conns) && time.Now().Before(deadline); {
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			stop()
			return nil, err
		}
	}
	cpu0, err := cpuTime(r.extraCPU)
	if err != nil {
		stop()
		return nil, err
	}
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	io0 := readProcIO()
	up0 := count(r.upstream)
	start := time.Now()
	phase.Store(phaseMeasure)
	if markSide != nil {
		markSide()
	}
	if err := sleep(ctx, r.measure); err != nil {
		stop()
		return nil, err
	}
	cpu1, err := cpuTime(r.extraCPU)
	elapsed := time.Since(start)
	up1 := count(r.upstream)
	io1 := readProcIO()
	runtime.ReadMemStats(&mem1)
	var flood *floodStats
	if stopSide != nil {
		flood, stopSide = stopSide(), nil
	}
	stop()
	if err != nil {
		return nil, err
	}
	s := &sample{elapsed: elapsed, cpu: cpu1 - cpu0, flood: flood,
		allocs: mem1.Mallocs - mem0.Mallocs, bytes: mem1.TotalAlloc - mem0.TotalAlloc,
		io: io1.minus(io0), upstream: up1 - up0, counted: r.upstream != nil}
	for _, w := range workers {
		s.add(&sample{requests: w.requests, errors: w.errors, hist: w.hist})
	}
	return s, nil
}

// count returns f(), or 0 when f is nil.
func count(f func() int64) int64 {
	if f == nil {
		return 0
	}
	return f()
}

// sleep waits d, or until ctx is done and returns its error.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop sends requests until the phase is phaseStop, counting those that
// complete while it is phaseMeasure.
// warmupWait bounds how long the warm-up waits for every worker's first
// answer after r.warmup.
const warmupWait = 30 * time.Second

func (w *worker) loop(ctx context.Context, tr *http.Transport, r spec, index int, phase, warm *atomic.Int32) {
	warmed := false
	var req *http.Request
	if r.newRequest == nil {
		var err error
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil); err != nil {
			w.fail(err.Error())
			return
		}
		req.Header = r.header.Clone()
	}
	want := cmp.Or(r.status, http.StatusOK)
	buf := make([]byte, readBufferSize)
	for seq := int64(0); ; seq++ {
		if r.newRequest != nil {
			var err error
			if req, err = r.newRequest(ctx, index, seq); err != nil {
				w.fail(err.Error())
				return
			}
		}
		t0 := time.Now()
		status, err := roundTrip(tr, req, buf)
		d := time.Since(t0)
		if err != nil {
			time.Sleep(10 * time.Millisecond) // do not spin on a dead target
		} else if !warmed {
			warmed = true
			warm.Add(1)
		}
		switch phase.Load() {
		case phaseWarmup:
			continue
		case phaseStop:
			return
		}
		switch {
		case err != nil:
			w.fail(err.Error())
		case status != want:
			w.fail(fmt.Sprintf("status %d", status))
		default:
			w.requests++
			w.hist.record(d)
		}
	}
}

func (w *worker) fail(what string) {
	if w.errors == nil {
		w.errors = map[string]int64{}
	}
	w.errors[what]++
}

// readBufferSize is the size of a worker's body buffer: reads larger than
// the transport's 4 KiB buffer go straight to the socket, so a 1 MiB body
// takes a few dozen read calls rather than the hundred-odd that io.Discard's
// 8 KiB buffer needs, and the load generator's cost stays small beside the
// target's.
const readBufferSize = 64 << 10

// roundTrip sends req and reads the whole body into buf, so the connection
// goes back to the pool. req may be sent again once roundTrip returned.
func roundTrip(tr *http.Transport, req *http.Request, buf []byte) (int, error) {
	res, err := tr.RoundTrip(req)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	for {
		_, err := res.Body.Read(buf)
		if err == io.EOF {
			return res.StatusCode, nil
		}
		if err != nil {
			return res.StatusCode, err
		}
	}
}

// sortedErrors lists errors as "what ×n", most frequent first.
func sortedErrors(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return out
}
