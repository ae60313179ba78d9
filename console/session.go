package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// The console's sessions. A login (POST /login with admin.token) makes a
// session: a random id in an HttpOnly, SameSite=Strict cookie, and a
// random CSRF token that every form of every page carries and every POST
// must send back. Sessions live in the process (a replica's login is not
// another's) and end at their deadline, at logout, or when admin.token
// changes (a reload that rotates the token logs everyone out).

// CookieName is the session cookie.
const CookieName = "osb_gateway_console"

// session is one login.
type session struct {
	csrf    string
	expires time.Time
	// token is the hash of the admin.token the login used: a session
	// outlives no rotation of the token.
	token [sha256.Size]byte
	who   string // the operator's name, from the login form (free text; "" if none)
}

// sessions are the live logins, by id.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*session
	ttl  time.Duration
	now  func() time.Time
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*session{}, ttl: ttl, now: now}
}

// randomToken returns 32 random bytes, base64url.
func randomToken() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("console: crypto/rand: " + err.Error()) // never fails on supported platforms
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// start makes a session for a login with token and returns its id.
func (s *sessions) start(token [sha256.Size]byte, who string) (string, *session) {
	id := randomToken()
	se := &session{csrf: randomToken(), expires: s.now().Add(s.ttl), token: token, who: who}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for k, x := range s.byID { // drop the expired: the map stays as small as the live logins
		if !now.Before(x.expires) {
			delete(s.byID, k)
		}
	}
	s.byID[id] = se
	return id, se
}

// get returns the live session of r's cookie, if its token is still
// admin.token (current: its hash; ok false while none is set).
func (s *sessions) get(r *http.Request, current [sha256.Size]byte, ok bool) (*session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil || c.Value == "" || !ok {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	se, ok := s.byID[c.Value]
	if !ok {
		return nil, false
	}
	if !s.now().Before(se.expires) || subtle.ConstantTimeCompare(se.token[:], current[:]) != 1 {
		delete(s.byID, c.Value)
		return nil, false
	}
	return se, true
}

// end deletes r's session.
func (s *sessions) end(r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil {
		s.mu.Lock()
		delete(s.byID, c.Value)
		s.mu.Unlock()
	}
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
