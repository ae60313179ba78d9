package console

import (
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// A session ends at its deadline, at logout, and when admin.token
// changes (a reload that rotates it logs everyone out).
func TestSessionLifetime(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := newSessions(time.Hour, clk.Now)
	old, rotated := sha256.Sum256([]byte("token-1")), sha256.Sum256([]byte("token-2"))
	req := func(id string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: id})
		return r
	}
	id, se := s.start(old, "alice")
	if got, ok := s.get(req(id), old, true); !ok || got != se {
		t.Fatal("a fresh session is not found")
	}
	if _, ok := s.get(req(id), old, false); ok {
		t.Error("a session outlives admin.token being unset")
	}
	if _, ok := s.get(req("forged"), old, true); ok {
		t.Error("an unknown session id is accepted")
	}
	if _, ok := s.get(req(id), rotated, true); ok {
		t.Error("a session outlives the rotation of admin.token")
	}
	if _, ok := s.get(req(id), old, true); ok {
		t.Error("a session ended by a rotation comes back with the old token")
	}

	id, _ = s.start(old, "bob")
	clk.Advance(time.Hour - time.Microsecond)
	if _, ok := s.get(req(id), old, true); !ok {
		t.Fatal("a session ends before its deadline")
	}
	clk.Advance(time.Microsecond)
	if _, ok := s.get(req(id), old, true); ok {
		t.Error("a session outlives its deadline")
	}

	id, se = s.start(old, "carol")
	if !se.csrfOK(se.csrf) || se.csrfOK("") || se.csrfOK(se.csrf+"x") {
		t.Error("the CSRF check")
	}
	s.end(req(id))
	if _, ok := s.get(req(id), old, true); ok {
		t.Error("a session outlives its logout")
	}
}
