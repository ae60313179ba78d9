package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/store"
)

// The console's sessions. A login (POST /login with admin.token) makes a
// session: a random id in an HttpOnly, SameSite=Strict cookie, and a CSRF
// token that every form of every page carries and every POST must send
// back. Sessions are kept in a SessionStore, the gateway's state store,
// so that replicas sharing it share them: a login made on one works on
// every other, a logout on one ends it on all. A session ends at its
// deadline, at logout, or when admin.token changes (a reload that rotates
// the token logs everyone out).
//
// The store never holds what a cookie or a form needs: it keys a session
// by the SHA-256 of its id, the CSRF token is an HMAC keyed by the id (not
// stored), and the tie to admin.token is another (Session.Check), which
// reveals nothing of the token to a reader of the store.

// CookieName is the session cookie.
const CookieName = "osb_gateway_console"

// SessionStore keeps the console's sessions: the part of the gateway's
// state store (store.SessionStore) the console uses. Its errors other than
// store.ErrNotFound mean the store cannot say.
type SessionStore interface {
	PutSession(ctx context.Context, k store.SessionKey, s store.Session) error
	GetSession(ctx context.Context, k store.SessionKey) (store.Session, error)
	DeleteSession(ctx context.Context, k store.SessionKey) error
}

// session is one login, as a request found it.
type session struct {
	key     store.SessionKey
	csrf    string
	expires time.Time
	who     string // the operator's name, from the login form (free text; "" if none)
}

// sessions are the logins, in st.
type sessions struct {
	st  SessionStore
	ttl time.Duration
	now func() time.Time
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// mac is the HMAC-SHA256 keyed by the session id id of the parts.
func mac(id string, parts ...[]byte) [sha256.Size]byte {
	h := hmac.New(sha256.New, []byte(id))
	for _, p := range parts {
		h.Write(p)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// csrfOf is the CSRF token of the session id: only a holder of the
// cookie can compute it, and the store does not keep it.
func csrfOf(id string) string {
	m := mac(id, []byte("osb-gateway console csrf"))
	return base64.RawURLEncoding.EncodeToString(m[:])
}

// checkOf ties the session id to the admin token whose hash is token.
func checkOf(id string, token [sha256.Size]byte) [sha256.Size]byte {
	return mac(id, []byte("osb-gateway console admin token\x00"), token[:])
}

// start makes a session for a login with token (its hash) and returns
// its id.
func (s *sessions) start(ctx context.Context, token [sha256.Size]byte, who string) (string, *session, error) {
	id := randomToken()
	se := &session{key: store.SessionKeyOf(id), csrf: csrfOf(id), expires: s.now().Add(s.ttl), who: who}
	err := s.st.PutSession(ctx, se.key, store.Session{Who: who, Check: checkOf(id, token), Expires: se.expires})
	if err != nil {
		return "", nil, err
	}
	return id, se, nil
}

// get returns the live session of r's cookie, if its token is still
// admin.token (current: its hash; ok false while none is set). err is
// set when the store cannot say.
func (s *sessions) get(r *http.Request, current [sha256.Size]byte, ok bool) (_ *session, found bool, err error) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || !ok {
		return nil, false, nil
	}
	k := store.SessionKeyOf(c.Value)
	st, err := s.st.GetSession(r.Context(), k)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	case !s.now().Before(st.Expires):
		return nil, false, nil // the store's clock lags the console's: the console's deadline holds
	}
	if want := checkOf(c.Value, current); subtle.ConstantTimeCompare(st.Check[:], want[:]) != 1 {
		// admin.token changed since the login: the session ends, on
		// every replica (best effort: it no longer matches anyway).
		_ = s.st.DeleteSession(r.Context(), k)
		return nil, false, nil
	}
	return &session{key: k, csrf: csrfOf(c.Value), expires: st.Expires, who: st.Who}, true, nil
}

// end deletes se, on every replica sharing the store.
func (s *sessions) end(ctx context.Context, se *session) error {
	return s.st.DeleteSession(ctx, se.key)
}

// csrfOK reports whether got is se's CSRF token.
func (se *session) csrfOK(got string) bool {
	return subtle.ConstantTimeCompare([]byte(se.csrf), []byte(got)) == 1
}

// cookie is the session cookie for id (an empty id with a past expiry
// clears it).
func cookie(id string, expires time.Time, secure bool) *http.Cookie {
	c := &http.Cookie{Name: CookieName, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: secure, Expires: expires}
	if id == "" {
		c.MaxAge = -1
	}
	return c
}
