// Package tokenlimit limits how many wrong admin tokens one client address
// may present to the admin listener: the bearer token of the /admin/ API
// and the token of the console's login share one limit. It is the
// platform listener's auth.failures (proxy/internal/auth/gate.go) for admin.token: a
// token bucket per client address (golang.org/x/time/rate) of Burst
// refusals in a row, then Burst per Window. An address with none left gets
// 429 with Retry-After and its token is not compared, right or wrong; a
// success never counts, and one address's success forgives no other's
// refusals. The first refusal over the limit of each Window is the one to
// log, so that a flood of guesses writes one warning a minute, not one a
// guess.
//
// The limit is fixed (the constants below): admin.token is at least 16
// characters and the admin listener is loopback by default, so 10 guesses a
// minute is no way in while a mistyped token or a stale script still gets
// its answer.
package tokenlimit

import (
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/time/rate"
)

const (
	// Burst is how many wrong admin tokens one client address may present
	// in a row.
	Burst = 10
	// Window is the time over which an address earns Burst attempts back
	// (one every Window/Burst), and the most often a limited address's
	// refusals are logged.
	Window = time.Minute
	// MaxAddresses bounds the client addresses tracked (the least recently
	// refused forgotten first): about 2 MB.
	MaxAddresses = 10000
)

// Limiter counts refused admin tokens per client address. The zero value
// is not usable: call New. It is safe for concurrent use.
type Limiter struct {
	now   func() time.Time
	addrs *lru.Cache[netip.Addr, *bucket]
	mu    sync.Mutex // guards every bucket's quiet and unlogged
}

// bucket is one address's refusals.
type bucket struct {
	lim *rate.Limiter
	// quiet: refusals over the limit before it are counted in unlogged,
	// not logged.
	quiet    time.Time
	unlogged int
}

// New returns a Limiter on the clock now (nil: time.Now).
func New(now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	addrs, err := lru.New[netip.Addr, *bucket](MaxAddresses)
	if err != nil {
		panic("tokenlimit: " + err.Error()) // only for a size below 1
	}
	return &Limiter{now: now, addrs: addrs}
}

// Addr is the address refusals count against: the connection's remote IP
// (never a header a client can set, such as X-Forwarded-For), an IPv6
// client's /64 (one host is usually given a whole /64). An address that
// does not parse counts as the zero Addr.
func Addr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
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

// Attempt is one refusal reserved against an address before its token is
// compared, so that concurrent guesses from one address never compare more
// tokens than it has refusals left.
type Attempt struct {
	r  *rate.Reservation
	at time.Time
}

// Succeeded gives the reserved refusal back: the token was right (or was
// not compared after all). A refused token keeps it.
func (a Attempt) Succeeded() {
	if a.r != nil {
		a.r.CancelAt(a.at)
	}
}

// Refused is the answer to an address over its limit.
type Refused struct {
	Addr netip.Addr
	// Wait is how long until the address may present a token again.
	Wait time.Duration
	// Log is set on the first refusal over the limit in a Window: the one
	// to log, with Unlogged, the refusals over the limit since the last
	// one logged. The others are not logged.
	Log      bool
	Unlogged int
}

// Begin reserves a refusal for addr before its token is compared. It
// returns false, and the answer to give, when addr has none left: then the
// token must not be compared.
func (l *Limiter) Begin(addr netip.Addr) (Attempt, Refused, bool) {
	now := l.now()
	b := l.bucket(addr)
	r := b.lim.ReserveN(now, 1)
	d := r.DelayFrom(now)
	if d <= 0 {
		return Attempt{r: r, at: now}, Refused{}, true
	}
	r.CancelAt(now)
	ref := Refused{Addr: addr, Wait: d}
	l.mu.Lock()
	if !now.Before(b.quiet) {
		ref.Log, ref.Unlogged = true, b.unlogged
		b.quiet, b.unlogged = now.Add(Window), 0
	} else {
		b.unlogged++
	}
	l.mu.Unlock()
	return Attempt{}, ref, false
}

// bucket returns addr's bucket, adding a full one when there is none.
func (l *Limiter) bucket(addr netip.Addr) *bucket {
	if b, ok := l.addrs.Get(addr); ok {
		return b
	}
	b := &bucket{lim: rate.NewLimiter(rate.Every(Window/Burst), Burst)}
	if prev, found, _ := l.addrs.PeekOrAdd(addr, b); found {
		return prev // added by a concurrent attempt
	}
	return b
}

// RetryAfter is the Retry-After of r: whole seconds, at least 1.
func (r Refused) RetryAfter() string {
	return strconv.FormatInt(r.seconds(), 10)
}

func (r Refused) seconds() int64 { return max(1, int64(math.Ceil(r.Wait.Seconds()))) }

// Description says why r was refused, for the answer and the log.
func (r Refused) Description() string {
	return fmt.Sprintf("too many refused admin tokens from %s: the admin listener allows %d in a row, then one every %s, "+
		"per client address; the token was not checked, retry after %ds", addrName(r.Addr), Burst, Window/Burst, r.seconds())
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
