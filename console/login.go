package console

// The login: the form, its checks (the token, the limit of refused tokens
// per client address, the body's size), where it goes back to (safeNext),
// and the logout.

import (
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
)

func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	_, ok, err := c.sessionOf(r)
	if err != nil {
		c.storeDown(w, r, err)
		return
	}
	if ok {
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	}
	c.renderLogin(w, http.StatusOK, "", r.URL.Query().Get("next"))
}

func (c *Console) renderLogin(w http.ResponseWriter, status int, msg, next string) {
	_, configured := c.o.View.AdminToken("")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = c.login.Execute(w, struct {
		Error, Next string
		Configured  bool
	}{msg, safeNext(next), configured})
}

// loginPost checks the login form's token against admin.token. The form
// is read up to MaxLoginForm bytes (413 past it, unread). A token compared
// and refused counts against the client address, and an address with too
// many gets 429 with Retry-After without its token being compared
// (package tokenlimit): logged once a minute, not once a try.
func (c *Console) loginPost(w http.ResponseWriter, r *http.Request) {
	r, ok := readForm(w, r, MaxLoginForm, "the login form")
	if !ok {
		return
	}
	token, who, next := r.PostForm.Get("token"), cleanName(r.PostForm.Get("who")), r.PostForm.Get("next")
	addr := tokenlimit.Addr(r)
	hash, configured := c.o.View.AdminTokenHash()
	var match bool
	if configured {
		attempt, refused, ok := c.tokens.Begin(addr)
		if !ok {
			if refused.Log {
				c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: login refused over the token limit", slog.String("who", who),
					slog.String("client_addr", clientAddr(r)), slog.Int("refusals_not_logged", refused.Unlogged),
					slog.String("note", "further refusals over the limit from this address are logged once a minute"))
			}
			w.Header().Set("Retry-After", refused.RetryAfter())
			c.renderLogin(w, http.StatusTooManyRequests, refused.Description(), next)
			return
		}
		if match, configured = c.o.View.AdminToken(token); match || !configured {
			attempt.Succeeded() // right, or no longer anything to guess (a reload unset admin.token)
		}
	}
	if !match {
		c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: login refused", slog.String("who", who),
			slog.String("client_addr", clientAddr(r)), slog.Bool("token_configured", configured))
		msg := "the token does not match admin.token"
		if !configured {
			msg = "admin.token is not set: the console is closed"
		}
		c.renderLogin(w, http.StatusUnauthorized, msg, next)
		return
	}
	id, se, err := c.sessions.start(r.Context(), hash, who)
	if err != nil {
		c.storeDown(w, r, err)
		return
	}
	http.SetCookie(w, cookie(id, se.expires, c.o.Secure || r.TLS != nil))
	c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: login", slog.String("who", who), slog.String("client_addr", clientAddr(r)))
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// readForm parses r's form, reading at most max bytes of its body (what
// names the form in the answer). A longer body gets 413 with Connection:
// close, unread (a declared Content-Length over max is not read at all),
// and a form that cannot be read 400; then ok is false and the answer is
// written. The request returned carries the form; r is not changed, so
// that the server, which still holds r's body, closes the connection
// rather than read the rest.
func readForm(w http.ResponseWriter, r *http.Request, max int64, what string) (_ *http.Request, ok bool) {
	tooLarge := func() {
		w.Header().Set("Connection", "close")
		osb.WriteError(w, osb.Errorf(http.StatusRequestEntityTooLarge, "", "%s is at most %d bytes: got more, and it was not read", what, max))
	}
	if r.ContentLength > max {
		tooLarge()
		return nil, false
	}
	rr := new(http.Request)
	*rr = *r
	rr.Body = http.MaxBytesReader(w, r.Body, max)
	if err := rr.ParseForm(); err != nil {
		if _, big := errors.AsType[*http.MaxBytesError](err); big {
			tooLarge()
			return nil, false
		}
		w.Header().Set("Connection", "close")
		osb.WriteError(w, osb.Errorf(http.StatusBadRequest, "", "%s could not be read: expected application/x-www-form-urlencoded", what))
		return nil, false
	}
	return rr, true
}

func (c *Console) logout(w http.ResponseWriter, r *http.Request) {
	se, ok, err := c.sessionOf(r)
	if err != nil {
		c.storeDown(w, r, err)
		return
	}
	if !ok {
		http.SetCookie(w, cookie("", time.Unix(0, 0), c.o.Secure || r.TLS != nil))
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return
	}
	if r, ok = readForm(w, r, MaxActionForm, "the logout form"); !ok {
		return
	}
	if se.csrfOK(r.PostForm.Get("csrf")) {
		if err := c.sessions.end(r.Context(), se); err != nil {
			c.storeDown(w, r, err) // the session may live on: say so rather than clear the cookie
			return
		}
		c.log.LogAttrs(r.Context(), slog.LevelInfo, "console: logout", slog.String("who", se.who))
	}
	http.SetCookie(w, cookie("", time.Unix(0, 0), c.o.Secure || r.TLS != nil))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// safeNext is next when it is a path of this listener, else "/", the
// console's home: the login never redirects elsewhere. Browsers drop tabs
// and line breaks inside a URL and read a backslash as a slash, so
// "/\t/evil.example" is "//evil.example" to them, another host. next is
// kept only when it is at most maxNext bytes, all printable ASCII but
// space and backslash, begins with "/" and not "//" (an absolute path, not
// a host), parses as a URL without scheme, host or user, and stays so
// (printable UTF-8 but space and backslash, not "//" first) however often
// its percent-escapes are decoded: a proxy or a browser may decode them.
func safeNext(next string) string {
	const home = "/"
	if len(next) > maxNext || !localPath(next, false) {
		return home
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return home
	}
	for s, rounds := next, 0; ; rounds++ {
		d, err := url.PathUnescape(s)
		switch {
		case err != nil || !localPath(d, true) || rounds == 4: // a broken escape, or escapes of escapes
			return home
		case d == s:
			return next
		}
		s = d
	}
}

// localPath reports whether s begins with one "/" and has no character a
// browser drops or reads as a slash: none but printable ASCII, space and
// backslash excepted; decoded, printable UTF-8 but space and backslash.
func localPath(s string, decoded bool) bool {
	if len(s) == 0 || s[0] != '/' || len(s) > 1 && (s[1] == '/' || s[1] == '\\') {
		return false
	}
	if decoded {
		return utf8.ValidString(s) && !strings.ContainsFunc(s, func(r rune) bool { return r == ' ' || r == '\\' || !unicode.IsPrint(r) })
	}
	for i := range len(s) {
		if b := s[i]; b <= ' ' || b == '\\' || b >= 0x7f {
			return false
		}
	}
	return true
}

// storeDown answers a request whose session the state store could not
// read or write: 503, and the error logged (it names the store's
// failure, never a session id or token).
func (c *Console) storeDown(w http.ResponseWriter, r *http.Request, err error) {
	c.log.LogAttrs(r.Context(), slog.LevelWarn, "console: the state store keeping the sessions does not answer",
		slog.String("path", r.URL.Path), slog.String("error", err.Error()))
	w.Header().Set("Retry-After", "5")
	osb.WriteError(w, osb.Errorf(http.StatusServiceUnavailable, "",
		"the console's sessions are kept in the state store, which does not answer: try again when it does"))
}
