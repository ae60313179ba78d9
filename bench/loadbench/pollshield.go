// This file runs the poll-shield request kind, run only when -requests
// names it: -poll-ops asynchronous provisions, each polled every
// -poll-interval by every one of -poll-pollers pollers (platforms or
// replicas, each at its own phase: the pollers of one operation are
// spread evenly over the interval, the operations too), from an open-loop
// load generator that sends each poll at its scheduled time whatever the
// answers before it took. Latency is measured from the scheduled time, so
// a target that falls behind pays for its queue. The targets, each with
// operations of its own on one sample broker (in progress throughout,
// Retry-After 1):
//
//   - direct: the sample broker itself;
//   - gateway: the real gateway with the poll settings at their defaults
//     (an in progress answer reused for its Retry-After, 1 s here);
//   - gateway min_interval 10s: the same with brokers[].poll.min_interval
//     10s.
//
// What counts is the broker's last_operation calls per second during the
// measured period against direct's, and the p99 each gateway adds. Each
// run polls for twice -poll-duration and measures the second half.

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/osb-gateway/osb-gateway/bench/internal/reference"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// kindPollShield is the poll-shield request kind, as named by -requests.
const kindPollShield = "poll-shield"

// The poll-shield kind's target names (besides direct).
const (
	targetShieldDefault = "gateway"
	targetShieldMin10   = "gateway min_interval 10s"
)

// pollShieldTargets are the kind's targets in report order.
var pollShieldTargets = []string{targetDirect, targetShieldDefault, targetShieldMin10}

// pollWorkers bounds the polls in flight per target: far more than a
// target that keeps up needs.
const pollWorkers = 256

// pollTarget is one target of the kind and the operations it polls.
type pollTarget struct {
	*target
	polls []string // last_operation URLs, one per operation
}

// pollSample is one measured run of one target.
type pollSample struct {
	polls       int64 // polls scheduled in the measured period and answered 200
	errors      map[string]int64
	brokerCalls int64 // last_operation calls the broker got in the measured period
	elapsed     time.Duration
	hist        histogram
}

// runPollShield sets the kind's broker and targets up, measures every
// pollers count and returns the rows.
func runPollShield(ctx context.Context, o options, progress io.Writer) ([]pollShieldRow, error) {
	b := samplebroker.New(samplebroker.Options{Username: brokerUser, Password: brokerPass, AsyncDelay: 24 * time.Hour})
	base, stop, err := serve("broker", b)
	if err != nil {
		return nil, err
	}
	defer stop()
	calls := func() int64 { return b.Count(samplebroker.EndpointInstanceLastOperation) }
	urls := map[string]string{"BROKER_URL": base, "COMPOSED_URL": base, "LARGE_URL": base}
	targets := []*pollTarget{{target: &target{name: targetDirect, base: base, header: brokerHeader()}}}
	for _, c := range []struct {
		name string
		poll config.Poll
	}{
		{targetShieldDefault, config.Poll{}},
		{targetShieldMin10, config.Poll{MinInterval: 10 * time.Second}},
	} {
		gw, err := buildGateway(urls, observe{poll: c.poll})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		gwBase, stop, err := serve("gateway", gw.handler)
		if err != nil {
			gw.close()
			return nil, fmt.Errorf("%s: %w", c.name, err)
		}
		defer func() { stop(); gw.close() }()
		targets = append(targets, &pollTarget{target: &target{name: c.name, base: gwBase + gatewayPath, header: platformHeader()}})
	}
	for i, t := range targets {
		fmt.Fprintf(progress, "poll-shield: provisioning %d instances through %s\n", o.pollOps, t.name)
		if t.polls, err = provisionMany(ctx, t.target, "ps"+strconv.Itoa(i), o.pollOps); err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
	}
	samples := map[pollCell][]pollSample{}
	for _, p := range o.pollPollers {
		for round := range o.rounds {
			for i := range targets {
				t := targets[(i+round)%len(targets)]
				// A warm-up as long as the measured period: an answer
				// reused for up to 10 s is past its first refresh.
				s, err := pollLoad(ctx, t, p, o.pollInterval, o.pollDuration, o.pollDuration, calls)
				if err != nil {
					return nil, fmt.Errorf("%s, %d pollers: %w", t.name, p, err)
				}
				fmt.Fprintf(progress, "poll-shield %d pollers  %-26s %7.0f polls/s  broker %7.1f calls/s  p50 %-9s p99 %-9s errors %d\n",
					p, t.name, float64(s.polls)/s.elapsed.Seconds(), float64(s.brokerCalls)/s.elapsed.Seconds(),
					fmtUS(us(s.hist.quantile(0.5))), fmtUS(us(s.hist.quantile(0.99))), total(s.errors))
				c := pollCell{p, t.name}
				samples[c] = append(samples[c], s)
			}
		}
	}
	return buildPollShield(o.pollPollers, samples), nil
}

// pollCell identifies the runs of one target at one pollers count.
type pollCell struct {
	pollers int
	target  string
}

// provisionMany starts n async provisions through t, 32 at a time, and
// returns the last_operation URL of each.
func provisionMany(ctx context.Context, t *target, prefix string, n int) ([]string, error) {
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"org-1","space_guid":"space-1"}`,
		samplebroker.ServiceID, samplebroker.PlanAsyncID)
	urls := make([]string, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			id := prefix + "-" + strconv.Itoa(i)
			req, err := http.NewRequestWithContext(ctx, http.MethodPut, t.url("/v2/service_instances/"+id+"?accepts_incomplete=true"),
				strings.NewReader(body))
			if err != nil {
				errs[i] = err
				return
			}
			req.Header = t.header.Clone()
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer res.Body.Close()
			var out struct {
				Operation string `json:"operation"`
			}
			if errs[i] = decodeJSON(res, http.StatusAccepted, &out); errs[i] != nil {
				return
			}
			q := url.Values{"service_id": {samplebroker.ServiceID}, "plan_id": {samplebroker.PlanAsyncID}, "operation": {out.Operation}}
			urls[i] = t.url("/v2/service_instances/" + id + "/last_operation?" + q.Encode())
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return urls, nil
}

// pollJob is one scheduled poll.
type pollJob struct {
	url      string
	at       time.Time
	measured bool
}

// pollLoad polls every operation of t pollers times per interval, for
// warmup and then duration, and measures the polls scheduled in the
// second period and the broker calls made in it.
func pollLoad(ctx context.Context, t *pollTarget, pollers int, interval, warmup, duration time.Duration, calls func() int64) (pollSample, error) {
	type slot struct {
		offset time.Duration
		url    string
	}
	n := len(t.polls)
	slots := make([]slot, 0, n*pollers)
	for i, u := range t.polls {
		for j := range pollers {
			// Operation i's pollers spread evenly over the interval,
			// starting at the operation's own phase.
			f := float64(i)/float64(n) + float64(j)/float64(pollers)
			f -= float64(int(f))
			slots = append(slots, slot{time.Duration(f * float64(interval)), u})
		}
	}
	slices.SortFunc(slots, func(a, b slot) int { return int(a.offset - b.offset) })
	tr := reference.PooledTransport(pollWorkers)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}

	start := time.Now().Add(10 * time.Millisecond)
	from, to := start.Add(warmup), start.Add(warmup+duration)
	jobs := make(chan pollJob, len(slots))
	var mu sync.Mutex
	s := pollSample{errors: map[string]int64{}, elapsed: duration}
	var wg sync.WaitGroup
	for range pollWorkers {
		wg.Go(func() {
			var h histogram
			var ok int64
			errs := map[string]int64{}
			for j := range jobs {
				status, err := pollOnce(ctx, client, t.header, j.url)
				done := time.Now()
				if !j.measured {
					continue
				}
				switch {
				case err != nil:
					errs[err.Error()]++
				case status != http.StatusOK:
					errs["status "+strconv.Itoa(status)]++
				default:
					ok++
					h.record(done.Sub(j.at))
				}
			}
			mu.Lock()
			s.polls += ok
			s.hist.merge(&h)
			for k, v := range errs {
				s.errors[k] += v
			}
			mu.Unlock()
		})
	}
	var before, after int64
	var counted sync.WaitGroup
	counted.Go(func() {
		time.Sleep(time.Until(from))
		before = calls()
		time.Sleep(time.Until(to))
		after = calls()
	})
dispatch:
	for k := 0; ; k++ {
		round := start.Add(time.Duration(k) * interval)
		for _, sl := range slots {
			at := round.Add(sl.offset)
			if !at.Before(to) {
				break dispatch
			}
			if d := time.Until(at); d > 0 {
				select {
				case <-time.After(d):
				case <-ctx.Done():
					break dispatch
				}
			}
			jobs <- pollJob{url: sl.url, at: at, measured: !at.Before(from)}
		}
	}
	close(jobs)
	wg.Wait()
	counted.Wait()
	s.brokerCalls = after - before
	return s, ctx.Err()
}

// pollOnce sends one GET last_operation and reads the answer whole.
func pollOnce(ctx context.Context, client *http.Client, header http.Header, u string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, err
	}
	req.Header = header.Clone()
	res, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, err
}
