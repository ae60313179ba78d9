// Package console serves the operator's status pages on the admin
// listener: an overview of routes, brokers, locks, orphans, reloads,
// certificates and refusals; the operations (locks) with the actions an
// operator takes on them; the inventory search; catalog drift; usage.
// Pages are rendered on the server (html/template, one embedded
// stylesheet, charts as inline SVG): nothing is loaded from elsewhere and
// no script runs, so the console works offline and behind any proxy.
//
// Every page needs a session: GET / without one redirects to /login,
// whose form takes admin.token (and, optionally, the operator's name,
// recorded with every action). A session is an HttpOnly, SameSite=Strict
// cookie; every action is a POST that carries the session's CSRF token.
// A login goes back only to a path of this listener (safeNext), reads at
// most MaxLoginForm bytes, and shares the admin API's limit of refused
// tokens per client address (package tokenlimit).
// No secret is rendered: the pages read proxy.View, which holds none.
package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/console.css
var stylesheet []byte

// Defaults of Options.
const (
	DefaultSessionTTL  = 8 * time.Hour
	DefaultSampleEvery = 10 * time.Second
	DefaultKeep        = 360 // an hour of samples at DefaultSampleEvery
)

// Options configure a Console. View is required; every other zero value
// is documented.
type Options struct {
	// View is the gateway the pages show and act on.
	View *proxy.View
	// Gatherer is the metrics registry (GET /metrics serves the same); the
	// charts and the refusal counts come from it. nil: metrics are off,
	// and the pages say so where they would show them.
	Gatherer prometheus.Gatherer
	// Log receives one line per login, logout and action (nil:
	// slog.Default()).
	Log *slog.Logger
	// SessionTTL is how long a login lasts (0: DefaultSessionTTL).
	SessionTTL time.Duration
	// Keep is how many metric samples the charts show (0: DefaultKeep);
	// Run takes one every SampleEvery.
	Keep int
	// Secure marks the session cookie Secure even on plain HTTP (the
	// admin listener stands behind a proxy that terminates TLS); over TLS
	// it is always marked.
	Secure bool
	// Tokens limits refused admin tokens per client address; serve shares
	// one with the admin API's bearer token. nil: a limiter of the
	// console's own on the view's clock.
	Tokens *tokenlimit.Limiter
}

// Bounds of what the console reads from a request.
const (
	// MaxLoginForm bounds the body of POST /login: a token, a name and
	// the page to go to. A longer one gets 413, unread.
	MaxLoginForm = 4 << 10
	// MaxActionForm bounds the body of an action (and of the logout),
	// read only behind a session.
	MaxActionForm = 16 << 10
	// maxNext bounds the page a login goes to (longer: the home page), so
	// that the login form that carries it stays under MaxLoginForm.
	maxNext = 512
)

// Console is the status pages' handler. Safe for concurrent use.
type Console struct {
	o        Options
	log      *slog.Logger
	pages    map[string]*template.Template
	login    *template.Template
	sessions *sessions
	hist     *history
	mux      *http.ServeMux
	tokens   *tokenlimit.Limiter
}

// New returns the console of o.View.
func New(o Options) *Console {
	if o.View == nil {
		panic("console: Options.View is nil")
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.Keep <= 0 {
		o.Keep = DefaultKeep
	}
	c := &Console{o: o, log: o.Log, sessions: newSessions(o.SessionTTL, o.View.Now), hist: &history{keep: o.Keep}, mux: http.NewServeMux(),
		tokens: o.Tokens}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.tokens == nil {
		c.tokens = tokenlimit.New(o.View.Now)
	}
	funcs := template.FuncMap{"fmtTime": fmtTime, "short": func(h string) string {
		if len(h) > 12 {
			return h[:12]
		}
		return h
	}}
	c.pages = map[string]*template.Template{}
	funcs["name"] = func(names map[string]string, id string) string {
		if n, ok := names[id]; ok {
			return n
		}
		return id
	}
	for _, p := range []string{"overview", "operations", "instances", "drift", "usage", "policies"} {
		c.pages[p] = template.Must(template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+p+".html"))
	}
	c.login = template.Must(template.New("login.html").ParseFS(templateFS, "templates/login.html"))
	c.mux.HandleFunc("GET /{$}", c.page("overview", c.overview))
	c.mux.HandleFunc("GET /ui/operations", c.page("operations", c.operations))
	c.mux.HandleFunc("GET /ui/instances", c.page("instances", c.instances))
	c.mux.HandleFunc("GET /ui/drift", c.page("drift", c.drift))
	c.mux.HandleFunc("GET /ui/usage", c.page("usage", c.usage))
	c.mux.HandleFunc("GET /ui/usage.csv", c.usageCSV)
	c.mux.HandleFunc("GET /ui/policies", c.page("policies", c.policies)) // policies.go
	c.mux.HandleFunc("POST /ui/drift/accept", c.action(c.accept))
	c.mux.HandleFunc("POST /ui/operations/release", c.action(c.release))
	c.mux.HandleFunc("POST /ui/operations/reconcile", c.action(c.reconcile))
	c.mux.HandleFunc("GET /login", c.loginPage)
	c.mux.HandleFunc("POST /login", c.loginPost)
	c.mux.HandleFunc("POST /logout", c.logout)
	c.mux.HandleFunc("GET /ui/assets/console.css", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/css; charset=utf-8")
		w.Header().Set("Cache-Control", "max-age=3600")
		_, _ = w.Write(stylesheet)
	})
	return c
}

// Patterns are the paths the admin listener must send to the console.
var Patterns = []string{"GET /{$}", "/ui/", "/login", "POST /logout"}

// ServeHTTP serves the console's paths (Patterns).
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	c.mux.ServeHTTP(w, r)
}

// Sample reads the metrics once into the charts' memory; Run calls it
// every SampleEvery (tests call it directly).
func (c *Console) Sample() {
	if c.o.Gatherer == nil {
		return
	}
	s, err := gather(c.o.Gatherer, c.o.View.Now())
	if err != nil {
		c.log.LogAttrs(context.Background(), slog.LevelWarn, "console: reading the metrics failed", slog.String("error", err.Error()))
		return
	}
	c.hist.add(s)
}

// Run samples the metrics every every (0: DefaultSampleEvery) until ctx
// ends.
func (c *Console) Run(ctx context.Context, every time.Duration) {
	if c.o.Gatherer == nil {
		return
	}
	if every <= 0 {
		every = DefaultSampleEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	c.Sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.Sample()
		}
	}
}

// frame is what every page's layout shows.
type frame struct {
	Title, CSRF, Who, Flash, Error, Now string
	Nav                                 []navItem
}

type navItem struct {
	Name, Href string
	Here       bool
}

var nav = []navItem{{"Overview", "/", false}, {"Operations", "/ui/operations", false}, {"Instances", "/ui/instances", false},
	{"Catalog drift", "/ui/drift", false}, {"Usage", "/ui/usage", false}, {"Policies", "/ui/policies", false}}

// pageFunc fills a page's data; an error is shown on the page.
type pageFunc func(r *http.Request, f *frame) (any, error)

// page serves a page behind the session.
func (c *Console) page(name string, fill pageFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, ok := c.session(w, r)
		if !ok {
			return
		}
		f := &frame{CSRF: se.csrf, Who: se.who, Now: c.o.View.Now().UTC().Format("2006-01-02 15:04:05"),
			Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("error")}
		for _, n := range nav {
			n.Here = n.Href == r.URL.Path
			if n.Here {
				f.Title = n.Name
			}
			f.Nav = append(f.Nav, n)
		}
		data, err := fill(r, f)
		if err != nil {
			f.Error = err.Error()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := c.pages[name].ExecuteTemplate(w, "layout", struct {
			*frame
			Data any
		}{f, data}); err != nil {
			c.log.LogAttrs(r.Context(), slog.LevelError, "console: rendering a page failed", slog.String("page", name), slog.String("error", err.Error()))
		}
	}
}

// session returns r's session, or redirects to the login and reports
// false.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	if se, ok := c.sessionOf(r); ok {
		return se, true
	}
	next := r.URL.Path
	if r.URL.RawQuery != "" && r.Method == http.MethodGet {
		next += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, "/login?next="+url.QueryEscape(next), http.StatusSeeOther)
	return nil, false
}

// actionFunc carries out a POST action and returns where to go and what
// to say.
type actionFunc func(r *http.Request, who string) (back, flash string, err error)

// action serves a POST behind the session and its CSRF token; it
// redirects back (303) with the outcome.
func (c *Console) action(fn actionFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, ok := c.sessionOf(r)
		if !ok {
			osb.WriteError(w, osb.Errorf(http.StatusUnauthorized, "", "no console session: log in at /login first"))
			return
		}
		r, ok = readForm(w, r, MaxActionForm, "an action's form")
		if !ok {
			return
		}
		if !se.csrfOK(r.PostForm.Get("csrf")) {
			osb.WriteError(w, osb.Errorf(http.StatusForbidden, "", "the form's CSRF token is missing or is not this session's: reload the page and try again"))
			return
		}
		who := "console"
		if se.who != "" {
			who = "console:" + se.who
		}
		back, flash, err := fn(r, who)
		q := url.Values{}
		if err != nil {
			q.Set("error", err.Error())
		} else {
			q.Set("flash", flash)
		}
		sep := "?"
		if strings.Contains(back, "?") {
			sep = "&"
		}
		http.Redirect(w, r, back+sep+q.Encode(), http.StatusSeeOther)
	}
}

// cleanName keeps a printable operator name of at most 64 bytes.
func cleanName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, strings.TrimSpace(s))
	if len(s) > 64 {
		s = s[:64]
	}
	return s
}

func clientAddr(r *http.Request) string {
	host := r.RemoteAddr
	if i := strings.LastIndexByte(host, ':'); i > 0 {
		host = host[:i]
	}
	return host
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "–"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

// age formats a duration for people: 3s, 4m10s, 2h5m, 3d4h.
func age(d time.Duration) string {
	if d < 0 {
		return "-" + age(-d)
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

// names returns the sorted distinct values of key over xs.
func names[T any](xs []T, key func(T) string) []string {
	var out []string
	for _, x := range xs {
		if k := key(x); !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// routeBrokers names the brokers the routes reach, migrate_to brokers
// included, sorted.
func routeBrokers(routes []proxy.RouteInfo) []string {
	var out []string
	for _, r := range routes {
		for _, b := range []string{r.Broker, r.MigrateTo} {
			if b != "" && !slices.Contains(out, b) {
				out = append(out, b)
			}
		}
	}
	slices.Sort(out)
	return out
}

// stateError words a store failure for a page.
func stateError(what string, err error) error {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s: the state store is unavailable; the cause is in the gateway's log", what)
	}
	return fmt.Errorf("%s failed; the cause is in the gateway's log", what)
}

// sessionOf returns r's live session.
func (c *Console) sessionOf(r *http.Request) (*session, bool) {
	hash, ok := c.o.View.AdminTokenHash()
	return c.sessions.get(r, hash, ok)
}
