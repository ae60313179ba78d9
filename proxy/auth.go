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

	// verified remembers bcrypt credentials already checked, keyed by a
	// SHA-256 of the presented username and password, so only the first
	// request with a credential pays for bcrypt. Only successes are stored,
	// so it holds at most one entry per bcrypt credential.
	verified sync.Map // [32]byte → struct{}
}

// credential holds SHA-256 digests, so comparisons run in constant time
// over fixed-length values whatever the lengths presented.
type credential struct {
	user   [32]byte
	pass   [32]byte
	bcrypt []byte // non-nil: pass is unused, compare with bcrypt
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
			cr.pass = sha256.Sum256([]byte(c.Password.Reveal()))
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
	u := sha256.Sum256(user)
	p := sha256.Sum256(pass)
	ok := 0
	for i := range t.creds {
		c := &t.creds[i]
		um := subtle.ConstantTimeCompare(u[:], c.user[:])
		if c.bcrypt == nil {
			ok |= um & subtle.ConstantTimeCompare(p[:], c.pass[:])
			continue
		}
		if um == 1 && t.bcryptOK(c, user, pass) {
			ok = 1
		}
	}
	return ok == 1
}

func (t *tenant) bcryptOK(c *credential, user, pass []byte) bool {
	h := sha256.New()
	h.Write(c.bcrypt)
	h.Write([]byte{0})
	h.Write(user)
	h.Write([]byte{0})
	h.Write(pass)
	var key [32]byte
	h.Sum(key[:0])
	if _, ok := t.verified.Load(key); ok {
		return true
	}
	if bcrypt.CompareHashAndPassword(c.bcrypt, []byte(pass)) != nil {
		return false
	}
	t.verified.Store(key, struct{}{})
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
			s := ScopeFrom(r.Context())
			t := s.route.tenant
			pwNeeded, certErr := t.cert.PasswordNeeded(r.TLS)
			if certErr != nil {
				s.fail(w, &osb.Error{Status: http.StatusUnauthorized, Err: certErr, Header: http.Header{"Www-Authenticate": challenge},
					Description: fmt.Sprintf("the client certificate is not accepted for tenant %q: %s", t.name, certErr)})
				return
			}
			if !pwNeeded { // a matching certificate is enough for this tenant
				next.ServeHTTP(w, r)
				return
			}
			var buf [256]byte
			header := r.Header.Get("Authorization")
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
				s.fail(w, err)
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
