package samplebroker

import (
	"encoding/base64"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// credentials replace Options.Username and Password at run time
// (SetCredentials, SetAuthorization).
type credentials struct {
	header string            // the byte-identical Authorization value, for basic auth
	user   string            // basic auth, for other spellings
	pass   string            //
	check  func(string) bool // instead of basic auth: decides on the Authorization value
}

// SetCredentials makes the broker accept, from its next request on, the
// basic-auth credentials username and password instead of those it was
// started with (a password rotation); requests carrying the old ones get
// 401. Brokers that never call it pay one atomic load per request.
func (b *Broker) SetCredentials(username, password string) {
	b.creds.Store(&credentials{
		header: "Basic " + base64.StdEncoding.EncodeToString([]byte(username+":"+password)),
		user:   username, pass: password,
	})
}

// SetAuthorization makes the broker accept a request when check, given
// its Authorization header ("" when it has none), returns true, in place
// of basic auth: a broker behind bearer tokens or OAuth2.
func (b *Broker) SetAuthorization(check func(authorization string) bool) {
	b.creds.Store(&credentials{check: check})
}

// allows reports whether r carries credentials c accepts.
func (c *credentials) allows(r *http.Request) bool {
	var h string
	if v := r.Header["Authorization"]; len(v) > 0 {
		h = v[0]
	}
	if c.check != nil {
		return c.check(h)
	}
	if constantTimeEqual(h, c.header) {
		return true
	}
	u, p, ok := r.BasicAuth()
	return ok && constantTimeEqual(u, c.user) && constantTimeEqual(p, c.pass)
}

// authorized reports whether r carries the broker's credentials. The common
// case, an Authorization header byte-identical to the expected one, costs no
// allocation; other spellings ("basic" in lower case) are decoded.
func (b *Broker) authorized(r *http.Request) bool {
	if c := b.creds.Load(); c != nil {
		return c.allows(r)
	}
	if b.authHeader == "" {
		return true
	}
	if h := r.Header["Authorization"]; len(h) > 0 && constantTimeEqual(h[0], b.authHeader) {
		return true
	}
	u, p, ok := r.BasicAuth()
	return ok && constantTimeEqual(u, b.opts.Username) && constantTimeEqual(p, b.opts.Password)
}

// unauthorized writes 401 with a basic-auth challenge and an OSB error body.
func (b *Broker) unauthorized(w http.ResponseWriter) {
	w.Header()["Www-Authenticate"] = basicChallenge
	osb.WriteError(w, osb.Errorf(http.StatusUnauthorized, "", "missing or wrong basic-auth credentials"))
}

// constantTimeEqual compares two strings in time that depends only on their
// lengths.
func constantTimeEqual(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	var v byte
	for i := 0; i < len(a); i++ {
		v |= a[i] ^ b[i]
	}
	return v == 0
}
