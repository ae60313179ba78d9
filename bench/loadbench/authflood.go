// This file builds the targets of the auth-flood request kind, run only
// when -requests names it: legitimate GET last_operation calls of a tenant
// whose credential is a bcrypt hash of the default cost (the gateway
// verifies it once, then answers from its cache of verified credentials),
// all to one gateway as osb-gateway serve runs it by default (the auth
// section at its defaults):
//
//   - bcrypt tenant: undisturbed;
//   - + 40 wrong/s, 1 address: while a flooder sends floodRate wrong
//     passwords a second from one other client address (127.0.0.2), each
//     password new, so none is refused from the cache of refusals;
//   - + 40 wrong/s, 40 addresses: the same rate spread over floodRate
//     addresses (127.0.0.10 on), one a second each, which stays within
//     every address's failure limit: only the bcrypt slots bound what the
//     flood takes;
//   - + 40 wrong/s, 199 addresses, held: issue 28's spread flood, the same
//     rate over 199 addresses (127.0.1.1 to 127.0.1.199), each attacker
//     holding its connection until answered or floodHold has passed, with
//     no cap on the requests open at once (up to floodRate × floodHold):
//     the waiters for the bcrypt slots once filled listen.max_in_flight
//     and verified calls got 503. A run lasts a second or so, not the
//     minute such a flood takes to build up, so the flood opens with what
//     it would hold by then (floodRate × floodHold requests at once, as if
//     none had been answered), then sends floodRate a second.
//
// The legitimate calls come from 127.0.0.1. The first two floods keep at
// most floodInFlight requests open, as an attacker with that many
// connections would; a tick that finds them all open is skipped and
// counted. A flood starts before the warm-up (which spends the single
// address's burst) and stops after the measured period.

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// kindAuthFlood is the auth-flood request kind, as named by -requests.
const kindAuthFlood = "auth-flood"

// The auth-flood kind's target names, the first the baseline.
const (
	targetUndisturbed = "bcrypt tenant"
	targetFloodOne    = "+ 40 wrong/s, 1 address"
	targetFloodMany   = "+ 40 wrong/s, 40 addresses"
	targetFloodSpread = "+ 40 wrong/s, 199 addresses, held"
)

// The flood: floodRate wrong passwords a second, at most floodInFlight
// unanswered at a time.
const (
	floodRate     = 40
	floodInFlight = 64
)

// The spread flood: floodSpreadAddrs attackers, each holding a request
// until answered or floodHold has passed.
const (
	floodSpreadAddrs = 199
	floodHold        = 60 * time.Second
)

// bcryptTenant is the tenant whose credential is a bcrypt hash (of
// tenantPass, at bcrypt.DefaultCost) in gatewayYAML.
const bcryptTenant = "bench-bcrypt"

// bcryptDefaultCost is the cost of tenantHash: bcrypt's default, which
// htpasswd -B uses too.
const bcryptDefaultCost = bcrypt.DefaultCost

// tenantHash is the bcrypt hash of tenantPass, made once per process (it
// takes as long as a wrong password does).
var tenantHash = sync.OnceValues(func() (string, error) {
	h, err := bcrypt.GenerateFromPassword([]byte(tenantPass), bcryptDefaultCost)
	return string(h), err
})

// startAuthFlood starts the auth-flood kind's gateway and its targets.
func (e *env) startAuthFlood() error {
	gw, err := buildGateway(e.urls, observe{})
	if err != nil {
		return err
	}
	base, stop, err := serve("gateway", gw.handler)
	if err != nil {
		gw.close()
		return err
	}
	e.closers = append(e.closers, func() { stop(); gw.close() })
	base += "/" + bcryptTenant + "/" + brokerName
	path, err := e.requestPath(kindAuthFlood)
	if err != nil {
		return err
	}
	one := newFlooder(base+path, floodAddrs(netip.AddrFrom4([4]byte{127, 0, 0, 2}), 1), floodInFlight, 0)
	many := newFlooder(base+path, floodAddrs(netip.AddrFrom4([4]byte{127, 0, 0, 10}), floodRate), floodInFlight, 0)
	held := floodRate * int(floodHold/time.Second)
	spread := newFlooder(base+path, floodAddrs(netip.AddrFrom4([4]byte{127, 0, 1, 1}), floodSpreadAddrs), held, floodHold)
	spread.opening = held
	e.closers = append(e.closers, one.close, many.close, spread.close)
	e.authFlood = []*target{
		{name: targetUndisturbed, base: base, header: platformHeader()},
		{name: targetFloodOne, base: base, header: platformHeader(), flood: one},
		{name: targetFloodMany, base: base, header: platformHeader(), flood: many},
		{name: targetFloodSpread, base: base, header: platformHeader(), flood: spread},
	}
	return nil
}

// floodAddrs returns n consecutive addresses from first.
func floodAddrs(first netip.Addr, n int) []netip.Addr {
	out := make([]netip.Addr, n)
	for i := range out {
		out[i] = first
		first = first.Next()
	}
	return out
}

// flooder sends wrong passwords to one URL from a set of client addresses,
// in turn.
type flooder struct {
	url      string
	clients  []*http.Client // one per address, keeping its connections
	seq      atomic.Int64   // numbers the wrong passwords, so none repeats
	inFlight int            // the most requests open at once
	opening  int            // requests sent at once as the flood starts; 0: 1
}

// newFlooder returns a flooder with at most inFlight requests open, each
// given up after hold (0: never, until the flood stops).
func newFlooder(url string, addrs []netip.Addr, inFlight int, hold time.Duration) *flooder {
	f := &flooder{url: url, inFlight: inFlight}
	idle := max(1, inFlight/len(addrs))
	for _, a := range addrs {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: a.AsSlice()}, Timeout: 5 * time.Second}
		f.clients = append(f.clients, &http.Client{Timeout: hold, Transport: &http.Transport{Proxy: nil, DialContext: d.DialContext,
			MaxIdleConnsPerHost: idle}})
	}
	return f
}

// close drops the flooder's idle connections.
func (f *flooder) close() {
	for _, c := range f.clients {
		c.Transport.(*http.Transport).CloseIdleConnections()
	}
}

// start floods until stop is called, which returns what was sent and
// answered since mark was called (or since the start, without a mark).
func (f *flooder) start(ctx context.Context) (mark func(), stop func() *floodStats) {
	ctx, cancel := context.WithCancel(ctx)
	st := &floodStats{Addresses: len(f.clients), Answers: map[string]int64{}}
	var wg sync.WaitGroup
	open := make(chan struct{}, f.inFlight)
	t0 := time.Now()
	mark = func() {
		st.mu.Lock()
		clear(st.Answers)
		t0 = time.Now()
		st.mu.Unlock()
		st.sending.Store(0)
	}
	// fire sends the i-th wrong password, unless every connection is busy.
	fire := func(i int) {
		select {
		case open <- struct{}{}:
		default:
			st.add(floodSkipped)
			return
		}
		st.sending.Add(1)
		c := f.clients[i%len(f.clients)]
		pass := "wrong-" + strconv.FormatInt(f.seq.Add(1), 10)
		wg.Go(func() {
			defer func() { <-open }()
			answer := f.send(ctx, c, pass)
			if ctx.Err() == nil {
				st.add(answer)
			}
		})
	}
	opening := max(1, f.opening)
	for i := range opening { // the first at once: every run sends at least one
		fire(i)
	}
	wg.Go(func() {
		tick := time.NewTicker(time.Second / floodRate)
		defer tick.Stop()
		for i := opening; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				fire(i)
			}
		}
	})
	stop = func() *floodStats {
		st.mu.Lock()
		st.Seconds = time.Since(t0).Seconds()
		st.mu.Unlock()
		st.Sent = st.sending.Load()
		cancel()
		wg.Wait()
		return st
	}
	return mark, stop
}

// send sends one wrong password and describes the answer ("status 401").
func (f *flooder) send(ctx context.Context, c *http.Client, pass string) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, f.url, nil)
	if err != nil {
		return err.Error()
	}
	req.Header = ccHeader(basic(tenantUser, pass))
	res, err := c.Do(req)
	if err != nil {
		return "transport error"
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return fmt.Sprintf("status %d", res.StatusCode)
}

// floodStats is what a flood sent and what came back in the measured
// period.
type floodStats struct {
	Addresses int          `json:"addresses"`
	Seconds   float64      `json:"seconds"`
	Sent      int64        `json:"sent"` // wrong passwords sent, answered or not
	sending   atomic.Int64 // Sent while the flood runs
	// Answers counts the answers that came before the flood stopped
	// ("status 401", "status 429"), and floodSkipped. An answer to a
	// password sent before the period may count in it.
	Answers map[string]int64 `json:"answers"`
	mu      sync.Mutex
}

// floodSkipped counts the ticks that found every connection busy.
const floodSkipped = "skipped: all connections busy"

func (s *floodStats) add(answer string) {
	s.mu.Lock()
	s.Answers[answer]++
	s.mu.Unlock()
}

// merge adds o to s (rounds of one cell).
func (s *floodStats) merge(o *floodStats) {
	s.Addresses = o.Addresses
	s.Seconds += o.Seconds
	s.Sent += o.Sent
	if s.Answers == nil {
		s.Answers = map[string]int64{}
	}
	for k, v := range o.Answers {
		s.Answers[k] += v
	}
}

// perSecond returns how many answers of kind came a second.
func (s *floodStats) perSecond(answer string) float64 {
	if s == nil || s.Seconds == 0 {
		return 0
	}
	return float64(s.Answers[answer]) / s.Seconds
}

// sent returns the wrong passwords sent a second (answered or not).
func (s *floodStats) sent() float64 {
	if s == nil || s.Seconds == 0 {
		return 0
	}
	return float64(s.Sent) / s.Seconds
}
