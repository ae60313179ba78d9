package console

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
)

// Console sessions live in the shared state store: two replicas over one
// Redis, and over one PostgreSQL, each with a store client of its own. A
// login on one works on the other (pages and actions, whose CSRF token
// the other accepts), a logout on one ends it on the other, and the
// deadline holds on both (an injected clock). Before, sessions lived in
// the process: a login to one replica was none to the other.
func TestSessionsAcrossReplicas(t *testing.T) {
	for name, cfg := range map[string]func(t *testing.T) store.Config{
		"redis":    func(t *testing.T) store.Config { return storetest.StartRedis(t).StoreConfig() },
		"postgres": func(t *testing.T) store.Config { return storetest.StartPostgres(t).StoreConfig(t) },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := cfg(t)
			clk := osbtest.NewClock(time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC))
			replica := func() *consoleEnv {
				st, err := backend.Open(cfg, clk.Now)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.Close() })
				return newReplica(t, clk.Now, st)
			}
			testSessionsAcross(t, clk, replica(), replica())
		})
	}
}

func testSessionsAcross(t *testing.T, clk *osbtest.Clock, a, b *consoleEnv) {
	send := func(e *consoleEnv, method, path, form, cookie string) (*http.Response, string) {
		t.Helper()
		return e.send(t, method, path, form, cookie)
	}
	login := func(e *consoleEnv, who string) string {
		t.Helper()
		res, _ := send(e, http.MethodPost, "/login", url.Values{"token": {testToken}, "who": {who}}.Encode(), "")
		if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
			t.Fatalf("login: %d with cookies %v", res.StatusCode, res.Cookies())
		}
		return CookieName + "=" + res.Cookies()[0].Value
	}
	csrfField := regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	// page GETs / of e with cookie and returns the page's CSRF token, or
	// "" when it redirects to the login.
	page := func(e *consoleEnv, cookie string) string {
		t.Helper()
		res, body := send(e, http.MethodGet, "/", "", cookie)
		if res.StatusCode == http.StatusSeeOther && strings.HasPrefix(res.Header.Get("Location"), "/login") {
			return ""
		}
		m := csrfField.FindStringSubmatch(body)
		if res.StatusCode != http.StatusOK || m == nil {
			t.Fatalf("GET /: %d, csrf %v", res.StatusCode, m)
		}
		return m[1]
	}

	cookie := login(a, "alice")
	csrf := page(b, cookie)
	if csrf == "" {
		t.Fatal("a login on replica a is no session on replica b")
	}
	if got := page(a, cookie); got != csrf {
		t.Errorf("the replicas give the session different CSRF tokens: %q and %q", got, csrf)
	}
	res, body := send(a, http.MethodPost, "/ui/refresh", url.Values{"csrf": {csrf}, "refresh": {"on"}, "back": {"/"}}.Encode(), cookie)
	if res.StatusCode != http.StatusSeeOther {
		t.Errorf("an action on replica a with the token replica b showed: %d %s", res.StatusCode, body)
	}

	res, _ = send(b, http.MethodPost, "/logout", url.Values{"csrf": {csrf}}.Encode(), cookie)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout on replica b: %d", res.StatusCode)
	}
	if page(a, cookie) != "" {
		t.Error("a logout on replica b leaves the session alive on replica a")
	}
	if res, _ := send(a, http.MethodPost, "/ui/refresh", url.Values{"csrf": {csrf}}.Encode(), cookie); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("an action on replica a after the logout on b: %d, want 401", res.StatusCode)
	}

	cookie = login(b, "bob")
	clk.Advance(DefaultSessionTTL - time.Microsecond)
	if page(a, cookie) == "" {
		t.Fatal("a session ends on the other replica before its deadline")
	}
	clk.Advance(time.Microsecond)
	if page(a, cookie) != "" || page(b, cookie) != "" {
		t.Error("a session outlives its deadline")
	}
	for _, e := range []*consoleEnv{a, b} {
		if strings.Contains(e.logs.String(), strings.TrimPrefix(cookie, CookieName+"=")) || strings.Contains(e.logs.String(), csrf) {
			t.Error("a session id or CSRF token is in the log")
		}
	}
}
