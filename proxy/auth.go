package proxy

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"net/http"
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
}

// credential holds SHA-256 digests, so comparisons run in constant time
// over fixed-length values whatever the lengths presented.
type credential struct {
	user   [32]byte // SHA-256 of the username
	pair   [32]byte // presentedDigest of the username and password
	bcrypt []byte   // non-nil: pair is unused, compare with bcrypt
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

func newTenant(tc *config.Tenant) *tenant {
	t := &tenant{name: tc.Name, missingStatus: tc.MissingVersionStatus}
	t.cert, _ = gwtls.NewClientCertRule(tc.ClientCert) // subjects were checked by config validation
	for i := range tc.Credentials {
		c := &tc.Credentials[i]
		cr := credential{user: sha256.Sum256([]byte(c.Username))}
		if c.IsBcrypt() {
			cr.bcrypt = []byte(c.Password.Reveal())
		} else {
			cr.pair = presentedDigest([]byte(c.Username), []byte(c.Password.Reveal()))
		}
		t.creds = append(t.creds, cr)
	}
	return t
}

// authenticate reports whether user and pass match one of the tenant's
// credentials. Every plain credential is compared, so timing does not tell
// which one (or whether a username) matched.
func (t *tenant) authenticate(user, pass string) bool {
	return t.authenticateBytes([]byte(user), []byte(pass))
}

func (t *tenant) authenticateBytes(user, pass []byte) bool {
	d := presentedDigest(user, pass)
	var known *credential // the bcrypt credential d was verified for
	if v, ok := t.verified.Load(d); ok {
		known = v.(*credential)
	}
	ok := 0
	for i := range t.creds {
		c := &t.creds[i]
		if c.bcrypt == nil {
			ok |= subtle.ConstantTimeCompare(d[:], c.pair[:])
			continue
		}
		if known == c || (known == nil && t.bcryptOK(c, d, user, pass)) {
			ok = 1
		}
	}
	return ok == 1
}

// bcryptOK checks a pair not verified before against a bcrypt credential
// and remembers it under its digest d when it matches.
func (t *tenant) bcryptOK(c *credential, d [32]byte, user, pass []byte) bool {
	u := sha256.Sum256(user)
	if subtle.ConstantTimeCompare(u[:], c.user[:]) != 1 {
		return false
	}
	if bcrypt.CompareHashAndPassword(c.bcrypt, pass) != nil {
		return false
	}
	t.verified.Store(d, c)
	return true
}

// Realm is the basic-auth realm the gateway announces.
const Realm = "osb-gateway"

var challenge = []string{`Basic realm="` + Realm + `"`}

// withAuth is the auth stage: the route's tenant credentials, by HTTP basic
// auth. The platform's Authorization header is never forwarded: the upstream
// stage replaces it with the broker's own credentials.
func withAuth() Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			t := s.route.tenant
			pwNeeded, certErr := t.cert.PasswordNeeded(r.TLS)
			if certErr != nil {
				s.failUnread(w, r, &osb.Error{Status: http.StatusUnauthorized, Err: certErr, Header: http.Header{"Www-Authenticate": challenge},
					Description: fmt.Sprintf("the client certificate is not accepted for tenant %q: %s", t.name, certErr)})
				return
			}
			if !pwNeeded { // a matching certificate is enough for this tenant
				next.ServeHTTP(w, r)
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
				err = osb.Errorf(http.StatusUnauthorized, "", "credentials required: expected HTTP basic auth for tenant %q, got %s", t.name, describeAuth(header))
			case !t.authenticateBytes(user, pass):
				err = osb.Errorf(http.StatusUnauthorized, "", "the basic-auth credentials are not valid for tenant %q", t.name)
			}
			if err != nil {
				err.Header = http.Header{"Www-Authenticate": challenge}
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
