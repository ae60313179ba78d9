// Package auth is the authentication stage: each tenant's basic-auth
// credentials (bcrypt or plain, a cache of verified pairs, a client
// certificate rule), and the Gate that bounds the bcrypt checks in flight
// and limits refused credentials per client address. It imports the core
// and no other stage; the in-flight gate it waits outside of is a
// core.Gate.
package auth

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
)

// Realm is the basic-auth realm the gateway announces.
const Realm = "osb-gateway"

var challenge = []string{`Basic realm="` + Realm + `"`}

// WithAuth is the auth stage: the route's tenant credentials, by client
// certificate and HTTP basic auth, within the limits of g (see authGate
// and tenant.verify). It reads nothing of the body (which the body stage,
// after it, does), and the platform's Authorization header is never
// forwarded: the upstream stage replaces it with the broker's own
// credentials.
//
// An address over its failure limit gets 429 before its credentials are
// looked at, so a correct guess cannot be told from a wrong one there;
// only a username and password already verified from that address pass.
// Refused credentials count against the address: wrong or malformed ones
// and a refused client certificate; a request that presents none does not.
func WithAuth(g *Gate) core.Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := core.ScopeOf(w, r)
			t := TenantOf(s.Route)
			addr := ClientAddr(r.RemoteAddr)
			pwNeeded, certErr := t.cert.PasswordNeeded(r.TLS)
			if certErr != nil {
				g.fail(addr)
				s.FailUnread(w, r, &osb.Error{Status: http.StatusUnauthorized, Err: certErr, Header: http.Header{"Www-Authenticate": challenge},
					Description: fmt.Sprintf("the client certificate is not accepted for tenant %q: %s", t.Name, certErr)})
				return
			}
			if !pwNeeded { // a matching certificate is enough for this tenant
				next.ServeHTTP(w, r)
				return
			}
			var buf [256]byte
			header := core.HeaderValue(r.Header, "Authorization")
			user, pass, ok := parseBasic(header, buf[:])
			var err *osb.Error
			if ok {
				s.Cred, err = t.Verify(r.Context(), g, addr, user, pass)
			} else if wait, over := g.overLimit(addr); over {
				err = g.tooMany(addr, wait)
			} else if header == "" {
				err = osb.Errorf(http.StatusUnauthorized, "", "credentials required: expected HTTP basic auth for tenant %q, got no Authorization header", t.Name)
			} else {
				g.fail(addr)
				err = osb.Errorf(http.StatusUnauthorized, "", "credentials required: expected HTTP basic auth for tenant %q, got %s", t.Name, describeAuth(header))
			}
			switch {
			case err == errRejoinShed:
				g.InFlight.Shed(w, r, s)
				return
			case err != nil:
				if err.Status == http.StatusUnauthorized {
					err.Header = http.Header{"Www-Authenticate": challenge}
					if ok {
						s.Cred = t.knownUser(user)
					}
				}
				s.FailUnread(w, r, err)
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
