package console

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/memory"
)

// A session ends at its deadline, at logout, and when admin.token
// changes (a reload that rotates it logs everyone out).
func TestSessionLifetime(t *testing.T) {
	ctx := context.Background()
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &sessions{st: memory.New(clk.Now), ttl: time.Hour, now: clk.Now}
	old, rotated := sha256.Sum256([]byte("token-1")), sha256.Sum256([]byte("token-2"))
	req := func(id string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.AddCookie(&http.Cookie{Name: CookieName, Value: id})
		return r
	}
	get := func(id string, token [sha256.Size]byte, configured bool) (*session, bool) {
		t.Helper()
		se, ok, err := s.get(req(id), token, configured)
		if err != nil {
			t.Fatal(err)
		}
		return se, ok
	}
	start := func(who string) (string, *session) {
		t.Helper()
		id, se, err := s.start(ctx, old, who)
		if err != nil {
			t.Fatal(err)
		}
		return id, se
	}
	id, se := start("alice")
	if got, ok := get(id, old, true); !ok || *got != *se {
		t.Fatalf("a fresh session is not found: %+v, want %+v", got, se)
	}
	if _, ok := get(id, old, false); ok {
		t.Error("a session outlives admin.token being unset")
	}
	if _, ok := get("forged", old, true); ok {
		t.Error("an unknown session id is accepted")
	}
	if _, ok := get(id, rotated, true); ok {
		t.Error("a session outlives the rotation of admin.token")
	}
	if _, ok := get(id, old, true); ok {
		t.Error("a session ended by a rotation comes back with the old token")
	}

	id, _ = start("bob")
	clk.Advance(time.Hour - time.Microsecond)
	if _, ok := get(id, old, true); !ok {
		t.Fatal("a session ends before its deadline")
	}
	clk.Advance(time.Microsecond)
	if _, ok := get(id, old, true); ok {
		t.Error("a session outlives its deadline")
	}

	id, se = start("carol")
	if !se.csrfOK(se.csrf) || se.csrfOK("") || se.csrfOK(se.csrf+"x") || se.csrf == csrfOf("another id") {
		t.Error("the CSRF check")
	}
	if err := s.end(ctx, se); err != nil {
		t.Fatal(err)
	}
	if _, ok := get(id, old, true); ok {
		t.Error("a session outlives its logout")
	}
}

// What the store keeps of a session gives no cookie, no CSRF token and
// nothing of admin.token: the key is the id's hash, and the tie to the
// token a MAC keyed by the id.
func TestSessionStoreHoldsNoSecret(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	st := &recordingStore{SessionStore: memory.New(clk.Now)}
	s := &sessions{st: st, ttl: time.Hour, now: clk.Now}
	token := sha256.Sum256([]byte(testToken))
	id, se, err := s.start(context.Background(), token, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if st.key != store.SessionKeyOf(id) || st.key == store.SessionKey(sha256.Sum256(nil)) {
		t.Errorf("stored under %s, want the SHA-256 of the id", st.key)
	}
	if st.put.Check == token || st.put.Check == sha256.Sum256([]byte(testToken+id)) {
		t.Error("the stored check reveals the admin token's hash")
	}
	if st.put.Who != "alice" || !st.put.Expires.Equal(se.expires) {
		t.Errorf("stored %+v", st.put)
	}
}

// recordingStore records the last PutSession.
type recordingStore struct {
	SessionStore
	key store.SessionKey
	put store.Session
}

func (r *recordingStore) PutSession(ctx context.Context, k store.SessionKey, s store.Session) error {
	r.key, r.put = k, s
	return r.SessionStore.PutSession(ctx, k, s)
}

// A store that does not answer closes the console with a 503 that says
// why, on every path that needs a session, and logs the store's error.
func TestSessionStoreDown(t *testing.T) {
	down := downStore{}
	e := newReplica(t, nil, down)
	cookie := CookieName + "=" + randomToken()
	for _, c := range []struct{ method, path, form, cookie string }{
		{http.MethodPost, "/login", "token=" + testToken, ""},
		{http.MethodGet, "/", "", cookie},
		{http.MethodGet, "/login", "", cookie},
		{http.MethodPost, "/ui/refresh", "csrf=x", cookie},
		{http.MethodPost, "/logout", "csrf=x", cookie},
	} {
		res, body := e.send(t, c.method, c.path, c.form, c.cookie)
		if res.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "state store, which does not answer") ||
			len(res.Cookies()) != 0 {
			t.Errorf("%s %s with the store down: %d %v %s", c.method, c.path, res.StatusCode, res.Cookies(), body)
		}
	}
	if logs := e.logs.String(); !strings.Contains(logs, "connection refused") || strings.Contains(logs, strings.TrimPrefix(cookie, CookieName+"=")) {
		t.Errorf("the log: %s", logs)
	}
}

// downStore is a session store that does not answer.
type downStore struct{}

var errDown = fmt.Errorf("%w: redis GET session: dial tcp: connection refused", store.ErrUnavailable)

func (downStore) PutSession(context.Context, store.SessionKey, store.Session) error { return errDown }
func (downStore) GetSession(context.Context, store.SessionKey) (store.Session, error) {
	return store.Session{}, errDown
}
func (downStore) DeleteSession(context.Context, store.SessionKey) error { return errDown }
