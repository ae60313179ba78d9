package proxy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	gwtls "github.com/osb-gateway/osb-gateway/tls"
)

// tenant is one platform's identity at run time.
type tenant struct {
	name          string
	creds         []credential
	missingStatus int
	cert          gwtls.ClientCertRule // tenants[].client_cert

	// verified remembers bcrypt credentials already checked, keyed by the
	// digest of the presented username and password (presentedDigest), so
	// only the first request with a credential pays for bcrypt. Only
	// successes are stored, so it holds at most one entry per bcrypt
	// credential.
	verified sync.Map // [32]byte → *credential

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

// credential holds SHA-256 digests, so comparisons run in constant time
// over fixed-length values whatever the lengths presented.
type credential struct {
	user   [32]byte // SHA-256 of the username
	pair   [32]byte // presentedDigest of the username and password
	bcrypt []byte   // non-nil: pair is unused, compare with bcrypt
	name   string   // the username, for logs and audit records
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

// newTenant builds the auth side of tc. It fails on what config
// validation refuses (a client_cert subject it cannot parse, a password
// that starts like a bcrypt hash and is not one), so a configuration
// built past validation is refused here, not served with a rule missing.
func newTenant(tc *config.Tenant) (*tenant, error) {
	t := &tenant{name: tc.Name, missingStatus: tc.MissingVersionStatus}
	var err error
	if t.cert, err = gwtls.NewClientCertRule(tc.ClientCert); err != nil {
		return nil, fmt.Errorf("tenant %q: client_cert: %w", tc.Name, err)
	}
	perUser := map[[32]byte]int{}
	maxCost := 0
	for i := range tc.Credentials {
		c := &tc.Credentials[i]
		cr := credential{user: sha256.Sum256([]byte(c.Username)), name: c.Username}
		if c.IsBcrypt() {
			cr.bcrypt = []byte(c.Password.Reveal())
			cost, err := bcrypt.Cost(cr.bcrypt)
			if err != nil {
				return nil, fmt.Errorf("tenant %q: credentials[%d].password is not a bcrypt hash: %w", tc.Name, i, err)
			}
			maxCost = max(maxCost, cost)
			perUser[cr.user]++
			t.bcryptRuns = max(t.bcryptRuns, perUser[cr.user])
		} else {
			cr.pair = presentedDigest([]byte(c.Username), []byte(c.Password.Reveal()))
		}
		t.creds = append(t.creds, cr)
	}
	if t.bcryptRuns > 0 {
		t.dummy = dummyHash(maxCost)
	}
	return t, nil
}

// verify checks a username and password presented from addr against the
// tenant's credentials and returns the credential they match; a nil error
// means they are valid. Every plain credential is compared, so timing does
// not tell which one (or whether a username) matched. A pair neither cached nor plain goes to bcrypt, within g's
// limits: refused with 429 when addr has no failure left, waiting for a
// slot as long as ctx lasts (503 when it ends), and answered without
// bcrypt when refused a moment ago. A success costs addr nothing.
func (t *tenant) verify(ctx context.Context, g *authGate, addr netip.Addr, user, pass []byte) (*credential, *osb.Error) {
	d := presentedDigest(user, pass)
	if t.bcryptRuns > 0 { // verified holds bcrypt credentials only
		if c, ok := t.verified.Load(d); ok {
			return c.(*credential), nil
		}
	}
	match := -1
	for i := range t.creds {
		if c := &t.creds[i]; c.bcrypt == nil {
			match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(d[:], c.pair[:]), i, match)
		}
	}
	if match >= 0 {
		return &t.creds[match], nil
	}
	if t.bcryptRuns == 0 || g.recentlyFailed(t, d) {
		g.fail(addr)
		return nil, t.refused()
	}
	f, wait, ok := g.reserve(addr)
	if !ok {
		return nil, g.tooMany(addr, wait)
	}
	if err := g.acquire(ctx); err != nil {
		f.refund()
		return nil, g.abandoned(err)
	}
	// A copy for the comparisons: pass points into the auth stage's stack
	// buffer, which must not escape through g.compare on the hot path.
	c := t.bcryptMatch(g, user, bytes.Clone(pass))
	g.release()
	if c == nil {
		g.rememberFailed(t, d)
		return nil, t.refused()
	}
	f.refund()
	t.verified.Store(d, c)
	return c, nil
}

// knownUser returns the tenant's first credential whose username is user,
// or nil, comparing every credential's in constant time: it names the
// credential refused credentials were presented for, without writing down
// a username that is none of the tenant's (a password typed into the
// username field, say).
func (t *tenant) knownUser(user []byte) *credential {
	u := sha256.Sum256(user)
	match := -1
	for i := len(t.creds) - 1; i >= 0; i-- {
		match = subtle.ConstantTimeSelect(subtle.ConstantTimeCompare(u[:], t.creds[i].user[:]), i, match)
	}
	if match < 0 {
		return nil
	}
	return &t.creds[match]
}

// bcryptMatch returns the bcrypt credential user and pass match, or nil
// after exactly bcryptRuns comparisons.
func (t *tenant) bcryptMatch(g *authGate, user, pass []byte) *credential {
	u := sha256.Sum256(user)
	runs := 0
	for i := range t.creds {
		c := &t.creds[i]
		if c.bcrypt == nil || subtle.ConstantTimeCompare(u[:], c.user[:]) != 1 {
			continue
		}
		runs++
		if g.compare(c.bcrypt, pass) == nil {
			return c
		}
	}
	for ; runs < t.bcryptRuns; runs++ {
		_ = g.compare(t.dummy, pass)
	}
	return nil
}

// refused is the answer to credentials that are not valid.
func (t *tenant) refused() *osb.Error {
	return osb.Errorf(http.StatusUnauthorized, "", "the basic-auth credentials are not valid for tenant %q", t.name)
}

// Realm is the basic-auth realm the gateway announces.
const Realm = "osb-gateway"

var challenge = []string{`Basic realm="` + Realm + `"`}

// withAuth is the auth stage: the route's tenant credentials, by client
// certificate and HTTP basic auth, within the limits of g (see authGate
// and tenant.verify). It reads nothing of the body (which the body stage,
// after it, does), and the platform's Authorization header is never
// forwarded: the upstream stage replaces it with the broker's own
// credentials.
//
// An address over its failure limit gets 429 before its credentials are
// looked at, so a correct guess cannot be told from a wrong one there.
// Refused credentials count against the address: wrong or malformed ones
// and a refused client certificate; a request that presents none does not.
func withAuth(g *authGate) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			t := s.route.tenant
			addr := clientAddr(r.RemoteAddr)
			pwNeeded, certErr := t.cert.PasswordNeeded(r.TLS)
			if certErr != nil {
				g.fail(addr)
				s.failUnread(w, r, &osb.Error{Status: http.StatusUnauthorized, Err: certErr, Header: http.Header{"Www-Authenticate": challenge},
					Description: fmt.Sprintf("the client certificate is not accepted for tenant %q: %s", t.name, certErr)})
				return
			}
			if !pwNeeded { // a matching certificate is enough for this tenant
				next.ServeHTTP(w, r)
				return
			}
			if wait, over := g.overLimit(addr); over {
				s.failUnread(w, r, g.tooMany(addr, wait))
				return
			}
			var buf [256]byte
			header := headerValue(r.Header, "Authorization")
			user, pass, ok := parseBasic(header, buf[:])
			var err *osb.Error
			switch {
			case header == "":
				err = osb.Errorf(http.StatusUnauthorized, "", "credentials required: expected HTTP basic auth for tenant %q, got no Authorization header", t.name)
			case !ok:
				g.fail(addr)
				err = osb.Errorf(http.StatusUnauthorized, "", "credentials required: expected HTTP basic auth for tenant %q, got %s", t.name, describeAuth(header))
			default:
				s.cred, err = t.verify(r.Context(), g, addr, user, pass)
			}
			if err != nil {
				if err.Status == http.StatusUnauthorized {
					err.Header = http.Header{"Www-Authenticate": challenge}
					if ok {
						s.cred = t.knownUser(user)
					}
				}
				s.failUnread(w, r, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// describeAuth names what an Authorization header that is not valid basic
// auth holds, without repeating any of its credentials.
func describeAuth(h string) string {
	scheme, _, _ := strings.Cut(h, " ")
	if strings.EqualFold(scheme, "Basic") {
		return "malformed basic credentials (expected base64 of user:password)"
	}
	if len(scheme) > 20 || strings.ContainsFunc(scheme, func(r rune) bool { return r < '!' || r > '~' }) {
		return "an Authorization header of an unknown scheme"
	}
	return fmt.Sprintf("the %q scheme", scheme)
}

// parseBasic decodes "Basic base64(user:pass)" into buf (so short
// credentials cost no allocation), as http.Request.BasicAuth does.
func parseBasic(h string, buf []byte) (user, pass []byte, ok bool) {
	const prefix = "Basic "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return nil, nil, false
	}
	enc := h[len(prefix):]
	if n := base64.StdEncoding.DecodedLen(len(enc)); n > len(buf) {
		buf = make([]byte, n)
	}
	n, err := base64.StdEncoding.Decode(buf, []byte(enc))
	if err != nil {
		return nil, nil, false
	}
	user, pass, ok = bytes.Cut(buf[:n], []byte{':'})
	return user, pass, ok
}
