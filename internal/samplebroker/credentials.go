package samplebroker

import (
	"encoding/base64"
	"net/http"
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
