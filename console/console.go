// Package console serves the operator's status pages on the admin
// listener: an overview that opens with what needs an operator, then
// routes, brokers, locks, orphans, reloads, certificates and refusals; the
// operations (locks) with the actions an operator takes on them; the
// inventory search and each instance's story; the audit trail; catalog
// drift; usage.
// Pages are rendered on the server (html/template, one embedded
// stylesheet, charts as inline SVG): nothing is loaded from elsewhere and
// no script runs, so the console works offline and behind any proxy.
//
// Every page needs a session: GET / without one redirects to /login,
// whose form takes admin.token (and, optionally, the operator's name,
// recorded with every action). A session is an HttpOnly, SameSite=Strict
// cookie, kept in the state store (Options.Sessions) so that replicas
// sharing it share the logins; every action is a POST that carries the
// session's CSRF token.
// A login goes back only to a path of this listener (safeNext), reads at
// most MaxLoginForm bytes, and shares the admin API's limit of refused
// tokens per client address (package tokenlimit).
// No secret is rendered: the pages read proxy.View, which holds none.
package console

import (
	"context"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store/memory"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets/console.css
var stylesheet []byte

// Defaults of Options.
const (
	DefaultSessionTTL   = 8 * time.Hour
	DefaultSampleEvery  = 10 * time.Second
	DefaultKeep         = 360 // an hour of samples at DefaultSampleEvery
	DefaultOldOperation = 30 * time.Minute
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
	// OldOperation is the age at which an operation in progress needs an
	// operator: the overview lists it first (0: DefaultOldOperation).
	OldOperation time.Duration
	// Tokens limits refused admin tokens per client address; serve shares
	// one with the admin API's bearer token. nil: a limiter of the
	// console's own on the view's clock.
	Tokens *tokenlimit.Limiter
	// Sessions keeps the logins; serve passes the gateway's state store,
	// so that replicas sharing it share them. nil: a memory store of the
	// console's own on the view's clock (a login to this console only).
	Sessions SessionStore
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
	funcs    template.FuncMap
	nav      []navItem
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
	if o.OldOperation <= 0 {
		o.OldOperation = DefaultOldOperation
	}
	if o.Sessions == nil {
		o.Sessions = memory.New(o.View.Now)
	}
	c := &Console{o: o, log: o.Log, sessions: &sessions{st: o.Sessions, ttl: o.SessionTTL, now: o.View.Now}, hist: &history{keep: o.Keep},
		mux: http.NewServeMux(), tokens: o.Tokens}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.tokens == nil {
		c.tokens = tokenlimit.New(o.View.Now)
	}
	c.pages, c.funcs = map[string]*template.Template{}, templateFuncs()
	for _, p := range []page{
		{Name: "overview", Path: "/{$}", Href: "/", Title: "Overview", Nav: true, Fill: c.overview},
		{Name: "operations", Path: "/ui/operations", Title: "Operations", Nav: true, Fill: c.operations},
		{Name: "instances", Path: "/ui/instances", Title: "Instances", Nav: true, Fill: c.instances},
		{Name: "instance", Path: "/ui/instances/{broker}/{id}", Title: "Instance", Fill: c.instance},
		{Name: "audit", Path: "/ui/audit", Title: "Audit", Nav: true, Fill: c.audit, NoRefresh: true}, // it reads every audit file
		{Name: "drift", Path: "/ui/drift", Title: "Catalog drift", Nav: true, Fill: c.drift},
		{Name: "usage", Path: "/ui/usage", Title: "Usage", Nav: true, Fill: c.usage},
		{Name: "policies", Path: "/ui/policies", Title: "Policies", Nav: true, Fill: c.policies}, // policies.go
		{Name: "force", Path: "/ui/operations/force", Title: "Force a final state", Fill: c.forcePage, NoRefresh: true},
	} {
		c.register(p)
	}
	c.login = template.Must(template.New("login.html").ParseFS(templateFS, "templates/login.html"))
	c.mux.HandleFunc("GET /ui/usage.csv", c.usageCSV)
	c.mux.HandleFunc("POST /ui/drift/accept", c.action(c.accept))
	c.mux.HandleFunc("POST /ui/operations/release", c.action(c.release))
	c.mux.HandleFunc("POST /ui/operations/reconcile", c.action(c.reconcile))
	c.mux.HandleFunc("POST /ui/refresh", c.refreshToggle)
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
	// Path is the page's path and query without its outcome (flash,
	// error): where a refresh goes.
	Path string
	// Refresh is the seconds between refreshes while they are on (0:
	// off); CanRefresh is set on pages that may refresh.
	Refresh    int
	CanRefresh bool
}

type navItem struct {
	Name, Href string
	Here       bool
}

// pageFunc fills a page's data; an error is shown on the page.
type pageFunc func(r *http.Request, f *frame) (any, error)

// page is one page of the console.
type page struct {
	// Name names its template, templates/Name.html, which defines
	// "content" (the layout around it is templates/layout.html).
	Name string
	// Path is its GET pattern (http.ServeMux); Href the link to it in the
	// navigation (default Path), shown when Nav is set, in the order of
	// registration.
	Path, Href string
	Title      string
	Nav        bool
	Fill       pageFunc
	// NoRefresh keeps the page from refreshing itself (a confirmation).
	NoRefresh bool
}

// register adds a page: its template parsed with the layout, its handler
// behind the session, and its link in the navigation. New registers the
// pages, from one table: a new page is a row there and a template.
func (c *Console) register(p page) {
	if p.Href == "" {
		p.Href = p.Path
	}
	c.pages[p.Name] = template.Must(template.New("layout").Funcs(c.funcs).ParseFS(templateFS, "templates/layout.html", "templates/records.html", "templates/"+p.Name+".html"))
	if p.Nav {
		c.nav = append(c.nav, navItem{Name: p.Title, Href: p.Href})
	}
	c.mux.HandleFunc("GET "+p.Path, c.servePage(p))
}

// servePage serves a page behind the session.
func (c *Console) servePage(p page) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		se, ok := c.session(w, r)
		if !ok {
			return
		}
		f := &frame{Title: p.Title, CSRF: se.csrf, Who: se.who, Now: c.o.View.Now().UTC().Format("2006-01-02 15:04:05"),
			Flash: r.URL.Query().Get("flash"), Error: r.URL.Query().Get("error"), Path: withoutOutcome(r.URL), CanRefresh: !p.NoRefresh}
		for _, n := range c.nav {
			n.Here = n.Href == r.URL.Path
			f.Nav = append(f.Nav, n)
		}
		if f.CanRefresh {
			f.Refresh = refreshOf(r)
		}
		data, err := p.Fill(r, f)
		if err != nil {
			f.Error = err.Error()
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if f.Refresh > 0 {
			w.Header().Set("Refresh", strconv.Itoa(f.Refresh)+"; url="+f.Path)
		}
		if err := c.pages[p.Name].ExecuteTemplate(w, "layout", struct {
			*frame
			Data any
		}{f, data}); err != nil {
			c.log.LogAttrs(r.Context(), slog.LevelError, "console: rendering a page failed", slog.String("page", p.Name), slog.String("error", err.Error()))
		}
	}
}

// session returns r's session, or redirects to the login and reports
// false.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (*session, bool) {
	se, ok, err := c.sessionOf(r)
	if err != nil {
		c.storeDown(w, r, err)
		return nil, false
	}
	if ok {
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
		r, who, ok := c.actionForm(w, r)
		if !ok {
			return
		}
		back, flash, err := fn(r, who)
		redirectBack(w, r, back, flash, err)
	}
}

// actionForm reads the form of a POST behind the session and checks its
// CSRF token; it returns the request with its form read and who acts, or
// answers and reports false.
func (c *Console) actionForm(w http.ResponseWriter, r *http.Request) (*http.Request, string, bool) {
	se, ok, err := c.sessionOf(r)
	if err != nil {
		c.storeDown(w, r, err)
		return r, "", false
	}
	if !ok {
		osb.WriteError(w, osb.Errorf(http.StatusUnauthorized, "", "no console session: log in at /login first"))
		return r, "", false
	}
	r, ok = readForm(w, r, MaxActionForm, "an action's form")
	if !ok {
		return r, "", false
	}
	if !se.csrfOK(r.PostForm.Get("csrf")) {
		osb.WriteError(w, osb.Errorf(http.StatusForbidden, "", "the form's CSRF token is missing or is not this session's: reload the page and try again"))
		return r, "", false
	}
	who := "console"
	if se.who != "" {
		who = "console:" + se.who
	}
	return r, who, true
}

// redirectBack answers an action: 303 to back with its outcome.
func redirectBack(w http.ResponseWriter, r *http.Request, back, flash string, err error) {
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

// sessionOf returns r's live session; err is set when the store cannot
// say.
func (c *Console) sessionOf(r *http.Request) (*session, bool, error) {
	hash, ok := c.o.View.AdminTokenHash()
	return c.sessions.get(r, hash, ok)
}
