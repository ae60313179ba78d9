// This file is the open-loop load generator the protect kind runs: calls
// sent at fixed intervals whatever the earlier ones got, on a warmed pool of
// connections, each call's status and timing kept.

package main

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// maxOutstanding bounds the calls an open-loop run has unanswered; a tick
// that finds this many is skipped and counted.
const maxOutstanding = 4096

// openResult is what one open-loop run got back.
type openResult struct {
	sent     int64
	skipped  int64            // ticks that found maxOutstanding calls unanswered
	byStatus map[int]int64    // answers by status
	errors   map[string]int64 // transport errors
	hists    map[int]*histogram
	elapsed  time.Duration
	calls    []timedCall // every call, when kept
}

// timedCall is one call of an open-loop run: when it was sent (from the
// start), what it got and how long it took.
type timedCall struct {
	at, took time.Duration
	status   int
}

// newClientTransport is the load generator's transport of an open-loop
// scenario: it keeps up to maxOutstanding idle connections, and warmPool
// fills it before the measured runs, so that a call waits for a dial only
// when more calls are outstanding than ever before.
func newClientTransport() *http.Transport {
	return &http.Transport{Proxy: nil, MaxIdleConns: maxOutstanding, MaxIdleConnsPerHost: maxOutstanding,
		DisableCompression: true, IdleConnTimeout: time.Minute}
}

// warmPool opens n connections to url through tr, each sending one GET at
// the same time, and leaves them idle in tr's pool.
func warmPool(ctx context.Context, tr *http.Transport, url string, n int) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header = platformHeader()
			_, _ = roundTrip(tr, req, make([]byte, 4096))
		})
	}
	wg.Wait()
}

// openLoop sends GET url with header through tr at rate calls per second
// for d, each at its time whatever the earlier ones got, and waits for the
// answers; keep keeps every call's timing.
func openLoop(ctx context.Context, tr *http.Transport, url string, header http.Header, rate float64, d time.Duration, keep bool) *openResult {
	res := &openResult{byStatus: map[int]int64{}, errors: map[string]int64{}, hists: map[int]*histogram{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var outstanding atomic.Int64
	interval := time.Duration(float64(time.Second) / rate)
	n := int(d / interval)
	start := time.Now()
	for i := range n {
		at := time.Duration(i) * interval
		if wait := time.Until(start.Add(at)); wait > 0 {
			if sleep(ctx, wait) != nil {
				break
			}
		}
		if outstanding.Load() >= maxOutstanding {
			res.skipped++
			continue
		}
		outstanding.Add(1)
		res.sent++
		wg.Go(func() {
			defer outstanding.Add(-1)
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			req.Header = header.Clone()
			buf := make([]byte, 4096)
			t0 := time.Now()
			status, err := roundTrip(tr, req, buf)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.errors[err.Error()]++
				return
			}
			res.byStatus[status]++
			h := res.hists[status]
			if h == nil {
				h = &histogram{}
				res.hists[status] = h
			}
			h.record(took)
			if keep {
				res.calls = append(res.calls, timedCall{at: t0.Sub(start), took: took, status: status})
			}
		})
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	return res
}

// hist returns the latencies of the answers of status (an empty histogram
// when there were none).
func (r *openResult) hist(status int) *histogram {
	if h := r.hists[status]; h != nil {
		return h
	}
	return &histogram{}
}

// others counts the calls that got neither of the statuses ok.
func (r *openResult) others(ok ...int) int64 {
	var n int64
	for s, c := range r.byStatus {
		found := false
		for _, o := range ok {
			found = found || s == o
		}
		if !found {
			n += c
		}
	}
	for _, c := range r.errors {
		n += c
	}
	return n + r.skipped
}
