package console

import (
	"encoding/json"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
)

// offListener are next values a login must not redirect to: each is, to
// a browser or to a proxy that decodes it, another host (or no path of
// the listener). They are the values of the form field, as the form
// decodes them.
var offListener = []string{
	"/\t/evil.example", "/\n/evil", "/\r/evil", "/\r\n/evil", "\t//evil", "/\t\t/evil",
	"/ /evil", " /evil", "/\\evil", "/\\\\evil", "\\\\evil", "/\\/evil", "//evil", "///evil", "//%09/evil",
	"https://evil", "http:evil", "https:/evil", "//user@evil", "javascript:alert(1)", "evil", "evil/", "",
	"\x00", "/\x00/evil", "/\x7f/evil", "/\x1b/evil",
	// percent-encoded: what a proxy or a browser may decode
	"/%09/evil.example", "/%0a/evil", "/%0d/evil", "/%0D%0A/evil", "/%00/evil", "/%7f/evil",
	"/%20/evil", "/%2f/evil", "/%2F/evil", "/%2f%2fevil", "%2f%2fevil", "/%5c%5cevil", "/%5Cevil", "/%5c/evil",
	"/%252f/evil", "/%25252f/evil", "/%2509/evil", "/%%2f/evil", "/%zz/evil", "/%",
	// unicode spaces and invisible characters, raw and encoded
	"/\u00a0/evil", "/\u1680/evil", "/\u2000/evil", "/\u200b/evil", "/\u2028/evil", "/\u2029/evil", "/\u3000/evil",
	"/\ufeff/evil", "/\u00ad/evil", "/\uff0f/evil",
	"/%c2%a0/evil", "/%e2%80%8b/evil", "/%e2%80%a8/evil", "/%e3%80%80/evil", "/%ef%bb%bf/evil", "/%ff/evil",
	"/" + strings.Repeat("a", maxNext),
}

// onListener are next values a login keeps.
var onListener = []string{"/", "/ui/operations?broker=b", "/ui/instances?tenant=t1&plan=p-1", "/ui/drift",
	"/ui/usage?from=2026-01-01T00%3A00%3A00Z&to=2026-02-01T00%3A00%3A00Z", "/ui/instances?id=a+b"}

// sessionClient is a client with a cookie jar that follows no redirect.
func sessionClient(t *testing.T) *http.Client {
	t.Helper()
	c := osbtest.ClientFrom(t, "127.0.0.1")
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Jar = jar
	return c
}

// Finding 5: POST /login with next=/%09/evil.example answered Location:
// /\t/evil.example, which a browser follows to //evil.example: browsers
// drop tabs and line breaks inside URLs. A login (and GET /login with a
// session) now redirects only to an absolute path of the listener; any
// other next falls back to the console's home, /.
func TestLoginNeverRedirectsOffTheListener(t *testing.T) {
	e := newConsoleEnv(t, nil)
	send := func(method, path, form, cookie string) (*http.Response, string) {
		t.Helper()
		return e.send(t, method, path, form, cookie)
	}
	res, _ := send(http.MethodPost, "/login", url.Values{"token": {testToken}}.Encode(), "")
	if len(res.Cookies()) != 1 {
		t.Fatalf("login: %d with cookies %v", res.StatusCode, res.Cookies())
	}
	session := res.Cookies()[0].Name + "=" + res.Cookies()[0].Value
	hidden := regexp.MustCompile(`name="next" value="([^"]*)"`)
	check := func(next, want string) {
		t.Helper()
		res, _ := send(http.MethodPost, "/login", url.Values{"token": {testToken}, "next": {next}}.Encode(), "")
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("POST /login next=%q: %d to %q, want 303 to %q", next, res.StatusCode, res.Header.Get("Location"), want)
		}
		// With a session, GET /login goes to next at once.
		res, _ = send(http.MethodGet, "/login?next="+url.QueryEscape(next), "", session)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != want {
			t.Errorf("GET /login next=%q with a session: %d to %q, want 303 to %q", next, res.StatusCode, res.Header.Get("Location"), want)
		}
		// Without one, the form carries only a safe next.
		_, page := send(http.MethodGet, "/login?next="+url.QueryEscape(next), "", "")
		if m := hidden.FindStringSubmatch(page); m == nil || html.UnescapeString(m[1]) != want {
			t.Errorf("GET /login next=%q: the form carries next %q, want %q", next, m, want)
		}
	}
	for _, next := range offListener {
		check(next, "/")
	}
	for _, next := range onListener {
		check(next, next)
	}
}

// Finding 6: POST /login, open to anyone, read bodies of any size (up to
// net/http's 10 MiB form limit each): 48 concurrent ones took the gateway
// from 291 to 762 MiB. The login form is now read up to MaxLoginForm: a
// longer body gets 413 without being read (with Connection: close), and so
// does an action's form past MaxActionForm.
func TestLoginBodyIsBounded(t *testing.T) {
	e := newConsoleEnv(t, nil)
	const size = 10 << 20
	post := func(c *http.Client, path string, body io.Reader, length int64) (*http.Response, string, int64) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+path, body)
		if err != nil {
			t.Fatal(err)
		}
		req.ContentLength = length // -1: chunked, the length unknown to the server
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		before := e.read.Load()
		res, err := c.Do(req)
		if err != nil {
			t.Fatalf("POST %s of %d bytes: %v", path, size, err)
		}
		b := read(t, res)
		return res, b, e.read.Load() - before
	}
	huge := func() io.Reader {
		return io.MultiReader(strings.NewReader("token="+testToken+"&who="), io.LimitReader(neverEnding('a'), size))
	}
	for _, tc := range []struct {
		name   string
		length int64
	}{{"declared length", int64(len("token="+testToken+"&who=")) + size}, {"chunked", -1}} {
		res, body, read := post(osbtest.ClientFrom(t, "127.0.0.1"), "/login", huge(), tc.length)
		if res.StatusCode != http.StatusRequestEntityTooLarge || !strings.Contains(body, fmt.Sprintf("at most %d bytes", MaxLoginForm)) ||
			strings.Contains(body, "aaaa") || len(res.Cookies()) != 0 {
			t.Errorf("%s: a 10 MiB login: %d %s, want 413 naming the limit, no echo, no session", tc.name, res.StatusCode, body)
		}
		if read > 1<<20 {
			t.Errorf("%s: a 10 MiB login: the server read %d bytes of it, want it left unread (under 1 MiB)", tc.name, read)
		}
		t.Logf("%s: the server read %d bytes of a %d-byte login", tc.name, read, size)
	}
	// A login just under the limit is read.
	pad := strings.Repeat("x", MaxLoginForm-len("token="+testToken+"&who=")-1)
	if res, _, _ := post(osbtest.ClientFrom(t, "127.0.0.1"), "/login", strings.NewReader("token="+testToken+"&who="+pad), -1); res.StatusCode != http.StatusSeeOther {
		t.Errorf("a login of %d bytes: %d, want 303", MaxLoginForm-1, res.StatusCode)
	}
	// An action's form, behind a session, is bounded too.
	c := sessionClient(t)
	res, err := c.PostForm(e.url+"/login", url.Values{"token": {testToken}})
	if err != nil {
		t.Fatal(err)
	}
	read(t, res)
	res, body, n := post(c, "/ui/operations/release", io.MultiReader(strings.NewReader("broker=b&reason="), io.LimitReader(neverEnding('a'), size)), -1)
	if res.StatusCode != http.StatusRequestEntityTooLarge || n > 1<<20 || strings.Contains(body, "aaaa") {
		t.Errorf("a 10 MiB action: %d %s, the server read %d bytes; want 413 and the body left unread", res.StatusCode, body, n)
	}
}

// neverEnding is an endless stream of one byte.
type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// Finding 7: the login compared every token sent, and logged each refusal
// at warn (500 in 0.2 s). A client address now has tokenlimit.Burst
// refusals in a row, then one every Window/Burst; past them the login
// answers 429 with Retry-After and compares nothing, the right token
// neither; another address's success forgives nothing; the 429s log once
// a minute.
func TestLoginTokenGuessesAreLimited(t *testing.T) {
	clk := osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	e := newConsoleEnv(t, clk.Now)
	guesser, operator := osbtest.ClientFrom(t, "127.0.0.1"), osbtest.ClientFrom(t, "127.0.0.2")
	login := func(c *http.Client, token string, want int, what string) (*http.Response, string) {
		t.Helper()
		res, err := c.PostForm(e.url+"/login", url.Values{"token": {token}, "who": {"mallory"}})
		if err != nil {
			t.Fatal(err)
		}
		body := read(t, res)
		if res.StatusCode != want {
			t.Fatalf("%s: %d, want %d: %s", what, res.StatusCode, want, body)
		}
		return res, body
	}
	for i := range tokenlimit.Burst {
		login(guesser, fmt.Sprintf("guess-%03d", i), http.StatusUnauthorized, "a wrong token within the limit")
	}
	res, body := login(guesser, "guess-past-the-limit", http.StatusTooManyRequests, "a wrong token past the limit")
	if res.Header.Get("Retry-After") != "6" || !strings.Contains(body, "too many refused admin tokens") || len(res.Cookies()) != 0 {
		t.Errorf("past the limit: Retry-After %q, cookies %v, page %s", res.Header.Get("Retry-After"), res.Cookies(), body)
	}
	login(guesser, testToken, http.StatusTooManyRequests, "the right token from the limited address (must not be compared)")
	login(operator, testToken, http.StatusSeeOther, "the right token from another address")
	login(guesser, "guess-after-the-other-success", http.StatusTooManyRequests, "the limited address after another's success")
	for i := range 300 {
		login(guesser, fmt.Sprintf("flood-%03d", i), http.StatusTooManyRequests, "the flood")
	}
	refused, over := 0, 0
	for _, line := range strings.Split(strings.TrimSpace(e.logs.String()), "\n") {
		var l struct{ Msg, Level string }
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		switch l.Msg {
		case "console: login refused":
			refused++
		case "console: login refused over the token limit":
			over++
		}
	}
	if refused != tokenlimit.Burst || over != 1 {
		t.Errorf("the log has %d refused logins and %d over the limit, want %d and 1 (once a minute, not once a try)", refused, over, tokenlimit.Burst)
	}
	clk.Advance(tokenlimit.Window / tokenlimit.Burst)
	login(guesser, testToken, http.StatusSeeOther, "the right token once an attempt came back")
	if strings.Contains(e.logs.String(), testToken) {
		t.Error("the token is in the log")
	}
}
