package auth

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"runtime"
	"strconv"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/crypto/bcrypt"
	"golang.org/x/time/rate"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// Gate bounds what checking credentials costs the gateway (config
// section auth). A bcrypt comparison takes tens of milliseconds of CPU, so
// a flood of wrong passwords would otherwise starve every other request:
//
//   - at most a fixed number of bcrypt comparisons run at once (slots),
//     and a fixed number of checks wait for one (the queue), for as long
//     as their request lasts; one more gets 429 at once (busy). While it
//     waits or hashes, a check does not count against
//     listen.max_in_flight (inFlight): the slots and the queue bound
//     them, so they never take a verified call's place there;
//   - concurrent checks of one username and password share one
//     comparison (tenant.checks);
//   - refused credentials are limited per client address with a token
//     bucket; an address over it gets 429 and nothing of what it sends is
//     checked, except a username and password already verified from that
//     address (tenant.verified): the limit is on hashing, not on the
//     verified;
//   - a username and password refused a moment ago are refused again
//     without bcrypt (failed).
//
// A Gateway has one; it is safe for concurrent use.
type Gate struct {
	now    func() time.Time
	limits *authLimits
	// failed maps a tenant and the digest of a refused username and
	// password to when they were refused. It is never carried over a
	// reload: new credentials may accept what the old ones refused.
	failed *lru.Cache[failedKey, time.Time]
	ttl    time.Duration
	// Compare is bcrypt.CompareHashAndPassword; tests count the calls.
	Compare func(hash, pass []byte) error
	// InFlight is the Gateway's listen.max_in_flight gate, which a check
	// leaves while it waits for or holds a bcrypt slot; nil: none (tests
	// of verify alone).
	InFlight core.Gate
}

// authLimits is the part of an authGate a reload carries over when its
// settings did not change: the bcrypt slots (so a reload does not double
// them while the old Gateway finishes its requests) and the failure counts
// per client address (so a reload does not forgive them).
type authLimits struct {
	failures config.AuthFailures
	slots    chan struct{} // one element per bcrypt comparison running
	queue    int32         // the most checks that may wait for a slot
	waiting  atomic.Int32  // checks waiting for a slot
	addrs    *lru.Cache[netip.Addr, *rate.Limiter]
}

// failedKey names a refused username and password of one tenant.
type failedKey struct {
	t *Tenant
	d [32]byte // presentedDigest
}

// failedDigests bounds authGate.failed: about 1 MB.
const failedDigests = 8192

// NewGate builds the gate for the auth section c, taking prev's limits
// over when their settings are the same. prev may be nil.
func NewGate(c config.Auth, now func() time.Time, prev *Gate) (*Gate, error) {
	g := &Gate{now: now, ttl: c.FailureCacheTTL, Compare: bcrypt.CompareHashAndPassword}
	var err error
	if g.failed, err = lru.New[failedKey, time.Time](failedDigests); err != nil {
		return nil, fmt.Errorf("auth failure cache: %w", err)
	}
	slots := c.BcryptSlots(runtime.GOMAXPROCS(0))
	queue := int32(c.BcryptWaiters(slots))
	if prev != nil && prev.limits.failures == c.Failures && cap(prev.limits.slots) == slots && prev.limits.queue == queue {
		g.limits = prev.limits
		return g, nil
	}
	l := &authLimits{failures: c.Failures, slots: make(chan struct{}, slots), queue: queue}
	if l.addrs, err = lru.New[netip.Addr, *rate.Limiter](max(1, c.Failures.MaxAddresses)); err != nil {
		return nil, fmt.Errorf("auth.failures.max_addresses: %w", err)
	}
	g.limits = l
	return g, nil
}

// ClientAddr is the address failures are counted by: the connection's
// remote IP (never a header a client can set, such as X-Forwarded-For), an
// IPv6 client's /64 (one host is usually given a whole /64). An address
// that does not parse (a Unix socket) counts as the zero Addr.
func ClientAddr(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.Addr()
	}
	return a
}

// overLimit reports whether addr has no failure left, and how long until
// it has one. It costs no allocation: it runs for every request.
func (g *Gate) overLimit(addr netip.Addr) (time.Duration, bool) {
	lim, ok := g.limits.addrs.Peek(addr)
	if !ok {
		return 0, false
	}
	tokens := lim.TokensAt(g.now())
	if tokens >= 1 {
		return 0, false
	}
	return time.Duration((1 - tokens) / float64(lim.Limit()) * float64(time.Second)), true
}

// limiter returns addr's bucket, adding a full one when there is none.
func (g *Gate) limiter(addr netip.Addr) *rate.Limiter {
	if lim, ok := g.limits.addrs.Get(addr); ok {
		return lim
	}
	f := g.limits.failures
	lim := rate.NewLimiter(rate.Limit(f.Rate), f.Burst)
	if prev, found, _ := g.limits.addrs.PeekOrAdd(addr, lim); found {
		return prev // added by a concurrent failure
	}
	return lim
}

// fail counts a refusal that cost nothing to find against addr.
func (g *Gate) fail(addr netip.Addr) {
	g.limiter(addr).AllowN(g.now(), 1)
}

// failure is a failure reserved for addr before a bcrypt check.
type failure struct {
	r  *rate.Reservation
	at time.Time
}

// reserve takes one failure from addr's bucket before a check that costs
// bcrypt, so concurrent checks from one address never exceed what it has
// left; it returns false and how long to wait when there is none.
func (g *Gate) reserve(addr netip.Addr) (failure, time.Duration, bool) {
	now := g.now()
	r := g.limiter(addr).ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return failure{}, d, false
	}
	return failure{r: r, at: now}, 0, true
}

// refund gives a reserved failure back: the check succeeded (or never
// ran). It cancels the reservation at the time it was made, as of which it
// is not yet due; rate gives back only what is not.
func (f failure) refund() { f.r.CancelAt(f.at) }

// errBcryptBusy is acquire's error when every slot is taken and the queue
// is full.
var errBcryptBusy = errors.New("every bcrypt slot is taken and the queue is full")

// acquire takes a bcrypt slot, waiting in the queue until one is free or
// ctx is done; errBcryptBusy without waiting when the queue is full.
func (g *Gate) acquire(ctx context.Context) error {
	select {
	case g.limits.slots <- struct{}{}:
		return nil
	default:
	}
	if g.limits.waiting.Add(1) > g.limits.queue {
		g.limits.waiting.Add(-1)
		return errBcryptBusy
	}
	defer g.limits.waiting.Add(-1)
	select {
	case g.limits.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// release frees the slot acquire took.
func (g *Gate) release() { <-g.limits.slots }

// recentlyFailed reports whether t refused the digest d less than ttl ago.
func (g *Gate) recentlyFailed(t *Tenant, d [32]byte) bool {
	at, ok := g.failed.Get(failedKey{t, d})
	return ok && g.now().Sub(at) < g.ttl
}

// rememberFailed records that t refused d.
func (g *Gate) rememberFailed(t *Tenant, d [32]byte) {
	g.failed.Add(failedKey{t, d}, g.now())
}

// tooMany is the answer to an address over its failure limit.
func (g *Gate) tooMany(addr netip.Addr, wait time.Duration) *osb.Error {
	f := g.limits.failures
	secs := max(1, int64(math.Ceil(wait.Seconds())))
	return &osb.Error{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {strconv.FormatInt(secs, 10)}},
		Description: fmt.Sprintf("too many refused credentials from %s: auth.failures allows %d in a row, then %s per second "+
			"per client address; the credentials were not checked, retry after %ds",
			addrName(addr), f.Burst, strconv.FormatFloat(f.Rate, 'g', -1, 64), secs)}
}

// bcryptBusyRetryAfter is the Retry-After of a check refused because the
// bcrypt queue was full: a full queue drains in about a second.
const bcryptBusyRetryAfter = 1

// busy is the answer to a check that found every bcrypt slot taken and the
// queue full (errBcryptBusy).
func (g *Gate) busy() *osb.Error {
	return &osb.Error{Status: http.StatusTooManyRequests, Err: errBcryptBusy, Header: core.RetryHeader(bcryptBusyRetryAfter),
		Description: fmt.Sprintf("the credentials were not checked: all %d bcrypt slots (auth.bcrypt_concurrency) are busy and "+
			"%d checks already wait for one (auth.bcrypt_queue); credentials already verified are not affected; retry after %ds",
			cap(g.limits.slots), g.limits.queue, bcryptBusyRetryAfter)}
}

// abandoned is the answer to a request that ended while it waited for a
// bcrypt slot (the platform hung up, or the gateway is shutting down).
func (g *Gate) abandoned(err error) *osb.Error {
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: fmt.Sprintf("the credentials were not checked: the request ended while it waited for one of the %d "+
			"bcrypt slots (auth.bcrypt_concurrency)", cap(g.limits.slots))}
}

// addrName names a client address in a description.
func addrName(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "this client"
	case a.Is6():
		return a.String() + "/64"
	}
	return a.String()
}

// dummyHash is a bcrypt hash of the given cost that costs as much to
// compare with as any other of that cost: it stands in for the hash of a
// username the tenant does not have, so that a wrong password costs the
// same whether its username exists or not. Only the cost field differs
// from a real hash; what it is compared with does not matter, as the
// result is ignored.
func dummyHash(cost int) []byte {
	return fmt.Appendf(nil, "$2a$%02d$%s", cost, "L7hJUUnTGjD9hBXbw8FaeuZctrwizijA3OpCJ7CIYTc8ycOugPNJS")
}

// Waiting is the number of checks waiting for a bcrypt slot.
func (g *Gate) Waiting() int32 { return g.limits.waiting.Load() }

// SlotsTaken is the number of bcrypt slots taken.
func (g *Gate) SlotsTaken() int { return len(g.limits.slots) }
