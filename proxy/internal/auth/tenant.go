package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/bcrypt"
	"golang.org/x/sync/singleflight"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

// Tenant is one platform's identity at run time.
type Tenant struct {
	Name          string
	creds         []core.Credential
	MissingStatus int
	cert          gwtls.ClientCertRule // tenants[].client_cert

	// verified remembers credentials already checked, keyed by the digest
	// of the presented username and password (presentedDigest), so only
	// the first request with a bcrypt credential pays for bcrypt, and a
	// client address over its failure limit still passes with a pair it
	// presented before. Only successes are stored, so it holds at most one
	// entry per credential.
	verified sync.Map // [32]byte → *verifiedPair
	// checks shares one bcrypt check among concurrent requests presenting
	// the same username and password, keyed by their presentedDigest (held
	// in memory only, never logged), so a wrong password never shares a
	// right one's result.
	checks singleflight.Group

	// bcryptRuns is how many bcrypt comparisons a refused password costs:
	// the most bcrypt credentials one username of the tenant has (usually
	// 1; 2 while a password is rotated), 0 for a tenant without any. A
	// username with fewer (or none: unknown, or a plain credential's) is
	// made up to it with comparisons against dummy, a hash of the highest
	// cost among the tenant's, so the time a wrong password takes does not
	// tell which usernames exist.
	bcryptRuns int
	dummy      []byte
}

// verifiedPair is a username and password a tenant accepted, and the
// client addresses they came from.
type verifiedPair struct {
	cred *core.Credential
	// addrs are the client addresses (clientAddr) the pair was presented
	// from, the latest first, at most verifiedAddrs: copied on write, so
	// that the hot path reads them without a lock.
	addrs atomic.Pointer[[]netip.Addr]
}

// verifiedAddrs bounds verifiedPair.addrs: a platform's egress addresses
// (a NAT, the nodes of a load balancer), not its every client.
const verifiedAddrs = 16

// from reports whether the pair was presented from addr.
func (p *verifiedPair) from(addr netip.Addr) bool {
	if as := p.addrs.Load(); as != nil {
		for _, a := range *as {
			if a == addr {
				return true
			}
		}
	}
	return false
}

// add records that the pair was presented from addr, forgetting the
// address that presented it least recently when there are too many.
func (p *verifiedPair) add(addr netip.Addr) {
	for {
		old := p.addrs.Load()
		as := make([]netip.Addr, 1, verifiedAddrs)
		as[0] = addr
		if old != nil {
			for _, a := range *old {
				if a != addr && len(as) < verifiedAddrs {
					as = append(as, a)
				}
			}
		}
		if p.addrs.CompareAndSwap(old, &as) {
			return
		}
	}
}

// presentedDigest is the SHA-256 of a username and password, the
// username's length first so that no two pairs share an input: one hash
// per request identifies what was presented.
func presentedDigest(user, pass []byte) [32]byte {
	var buf [258]byte
	if 2+len(user)+len(pass) > len(buf) {
		h := sha256.New()
		h.Write([]byte{byte(len(user) >> 8), byte(len(user))})
		h.Write(user)
		h.Write(pass)
		var d [32]byte
		h.Sum(d[:0])
		return d
	}
	b := append(append(append(buf[:0], byte(len(user)>>8), byte(len(user))), user...), pass...)
	return sha256.Sum256(b)
}

// NewTenant builds the auth side of tc. It fails on what config
// validation refuses (a client_cert subject it cannot parse, a password
// that starts like a bcrypt hash and is not one), so a configuration
// built past validation is refused here, not served with a rule missing.
func NewTenant(tc *config.Tenant) (*Tenant, error) {
	t := &Tenant{Name: tc.Name, MissingStatus: tc.MissingVersionStatus}
	var err error
	if t.cert, err = gwtls.NewClientCertRule(tc.ClientCert); err != nil {
		return nil, fmt.Errorf("tenant %q: client_cert: %w", tc.Name, err)
	}
	perUser := map[[32]byte]int{}
	maxCost := 0
	for i := range tc.Credentials {
		c := &tc.Credentials[i]
		cr := core.Credential{User: sha256.Sum256([]byte(c.Username)), Name: c.Username}
		if c.IsBcrypt() {
			cr.Bcrypt = []byte(c.Password.Reveal())
			cost, err := bcrypt.Cost(cr.Bcrypt)
			if err != nil {
				return nil, fmt.Errorf("tenant %q: credentials[%d].password is not a bcrypt hash: %w", tc.Name, i, err)
			}
			maxCost = max(maxCost, cost)
			perUser[cr.User]++
			t.bcryptRuns = max(t.bcryptRuns, perUser[cr.User])
		} else {
			cr.Pair = presentedDigest([]byte(c.Username), []byte(c.Password.Reveal()))
		}
		t.creds = append(t.creds, cr)
	}
	if t.bcryptRuns > 0 {
		t.dummy = dummyHash(maxCost)
	}
	return t, nil
}

// Verify checks a username and password presented from addr against the
// tenant's credentials and returns the credential they match; a nil error
// means they are valid.
//
// A pair verified before passes at once from an address it came from
// before, whatever that address's failures (limit the hashing, not the
// verified); from a new address, once the address is found within its
// failure limit. Otherwise an address over its limit gets 429, and its
// credentials are not looked at, so a guess cannot be told right from
// wrong there. Every plain credential is compared, so timing does not
// tell which one (or whether a username) matched. A pair neither verified
// nor plain goes to bcrypt (check), within g's limits. A success costs
// addr nothing.
func (t *Tenant) Verify(ctx context.Context, g *Gate, addr netip.Addr, user, pass []byte) (*core.Credential, *osb.Error) {
	d := presentedDigest(user, pass)
	if v, ok := t.verified.Load(d); ok {
		p := v.(*verifiedPair)
		if p.from(addr) {
			return p.cred, nil
		}
		if wait, over := g.overLimit(addr); over {
			return nil, g.tooMany(addr, wait)
		}
		p.add(addr)
		return p.cred, nil
	}
	if wait, over := g.overLimit(addr); over {
		return nil, g.tooMany(addr, wait)
	}
	match := -1
	for i := range t.creds {
		if c := &t.creds[i]; c.Bcrypt == nil {
			match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(d[:], c.Pair[:]), i, match)
		}
	}
	if match >= 0 {
		t.remember(d, &t.creds[match], addr)
		return &t.creds[match], nil
	}
	if t.bcryptRuns == 0 || g.recentlyFailed(t, d) {
		g.fail(addr)
		return nil, t.refused()
	}
	// Copies for the check: user and pass point into the auth stage's
	// stack buffer, which must not escape through it on the hot path.
	c, err := t.check(ctx, g, addr, d, bytes.Clone(user), bytes.Clone(pass))
	switch {
	case err != nil:
		return nil, err
	case c == nil:
		return nil, t.refused()
	}
	t.remember(d, c, addr)
	return c, nil
}

// remember records that the pair of digest d, presented from addr, is c.
func (t *Tenant) remember(d [32]byte, c *core.Credential, addr netip.Addr) {
	p := &verifiedPair{cred: c}
	if v, loaded := t.verified.LoadOrStore(d, p); loaded {
		p = v.(*verifiedPair)
	}
	if !p.from(addr) {
		p.add(addr)
	}
}

// check compares user and pass, of digest d, presented from addr, with
// the tenant's bcrypt credentials and returns the one they match, or nil.
// Concurrent checks of one pair share one comparison (sharedCheck); its
// callers wait out of listen.max_in_flight's count (see core.Gate).
// The error, when not nil, says why nothing was checked: addr had no
// failure left, the queue was full, ctx ended, or the gate had no room
// left for the call afterwards (errRejoinShed).
func (t *Tenant) check(ctx context.Context, g *Gate, addr netip.Addr, d [32]byte, user, pass []byte) (*core.Credential, *osb.Error) {
	if g.InFlight != nil {
		g.InFlight.Leave()
	}
	c, err := t.sharedCheck(ctx, g, addr, d, user, pass)
	if g.InFlight != nil && !g.InFlight.Rejoin() && err == nil && c != nil {
		return nil, errRejoinShed
	}
	return c, err
}

// errRejoinShed is check's error for a call whose credentials were
// verified when listen.max_in_flight had no room left for it: the auth
// stage sheds it as the overload stage would have.
var errRejoinShed = &osb.Error{Status: http.StatusServiceUnavailable, Description: "overloaded"}

// limited is the error of a shared check whose address had no failure
// left (authGate.reserve): it concerns that address only.
type limited struct{ wait time.Duration }

func (limited) Error() string { return "no failure left" }

// sharedCheck is check's comparison, shared by the concurrent checks of
// one pair. The request that runs it (leads) reserves a failure of its
// address first, so that concurrent checks of different pairs from one
// address never exceed what it has left, and gives it back on a success;
// one that shared a refusal counts a failure against its own address. A
// check that ends for the leader's reason (its request ended, its address
// is over the limit) is run again for the requests still waiting.
func (t *Tenant) sharedCheck(ctx context.Context, g *Gate, addr netip.Addr, d [32]byte, user, pass []byte) (*core.Credential, *osb.Error) {
	key := string(d[:])
	for {
		led := false // written before the result is sent, read after
		ch := t.checks.DoChan(key, func() (any, error) {
			led = true
			if v, ok := t.verified.Load(d); ok { // verified by a check that ended a moment ago
				return v.(*verifiedPair).cred, nil
			}
			f, wait, ok := g.reserve(addr)
			if !ok {
				return nil, limited{wait}
			}
			if err := g.acquire(ctx); err != nil {
				f.refund() // not checked: not a failure
				return nil, err
			}
			c := t.bcryptMatch(g, user, pass)
			g.release()
			if c == nil {
				g.rememberFailed(t, d)
				return c, nil
			}
			f.refund()
			return c, nil
		})
		var r singleflight.Result
		select {
		case r = <-ch:
		case <-ctx.Done():
			return nil, g.abandoned(ctx.Err())
		}
		var lim limited
		switch {
		case r.Err == nil:
			c := r.Val.(*core.Credential)
			if c == nil && !led {
				g.fail(addr)
			}
			return c, nil
		case errors.Is(r.Err, errBcryptBusy):
			return nil, g.busy()
		case errors.As(r.Err, &lim) && led:
			return nil, g.tooMany(addr, lim.wait)
		case !errors.As(r.Err, &lim) && ctx.Err() != nil:
			return nil, g.abandoned(ctx.Err())
		}
	}
}

// knownUser returns the tenant's first credential whose username is user,
// or nil, comparing every credential's in constant time: it names the
// credential refused credentials were presented for, without writing down
// a username that is none of the tenant's (a password typed into the
// username field, say).
func (t *Tenant) knownUser(user []byte) *core.Credential {
	u := sha256.Sum256(user)
	match := -1
	for i := len(t.creds) - 1; i >= 0; i-- {
		match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(u[:], t.creds[i].User[:]), i, match)
	}
	if match < 0 {
		return nil
	}
	return &t.creds[match]
}

// bcryptMatch returns the bcrypt credential user and pass match, or nil
// after exactly bcryptRuns comparisons.
func (t *Tenant) bcryptMatch(g *Gate, user, pass []byte) *core.Credential {
	u := sha256.Sum256(user)
	runs := 0
	for i := range t.creds {
		c := &t.creds[i]
		if c.Bcrypt == nil || subtle.ConstantTimeCompare(u[:], c.User[:]) != 1 {
			continue
		}
		runs++
		if g.Compare(c.Bcrypt, pass) == nil {
			return c
		}
	}
	for ; runs < t.bcryptRuns; runs++ {
		_ = g.Compare(t.dummy, pass)
	}
	return nil
}

// refused is the answer to credentials that are not valid.
func (t *Tenant) refused() *osb.Error {
	return osb.Errorf(http.StatusUnauthorized, "", "the basic-auth credentials are not valid for tenant %q", t.Name)
}

// TenantOf is the route's tenant (core.Route.Tenant); nil when the route
// has none.
func TenantOf(rt *core.Route) *Tenant { t, _ := rt.Tenant.(*Tenant); return t }

// Verified is the number of credential pairs the tenant's cache of
// successful checks holds.
func (t *Tenant) Verified() int {
	n := 0
	t.verified.Range(func(any, any) bool { n++; return true })
	return n
}
