package console

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// templateFuncs are the functions every page's template may call.
func templateFuncs() template.FuncMap {
	return template.FuncMap{
		"fmtTime": fmtTime,
		"short": func(h string) string {
			if len(h) > 12 {
				return h[:12]
			}
			return h
		},
		"name": nameOr,
		// svcName and planName are a service's and a plan's own names (a
		// plan's without its service's), else the id.
		"svcName":  nameOr,
		"planName": func(names map[string]string, id string) string { return planName(names, id) },
		// instanceURL is the instance page of an instance.
		"instanceURL": instanceURL,
		"age":         func(d time.Duration) string { return age(d) },
	}
}

// instanceURL is the path of the instance page of broker's instance id.
func instanceURL(broker, id string) string {
	return "/ui/instances/" + url.PathEscape(broker) + "/" + url.PathEscape(id)
}

// nameOr is the name names has for id, else id.
func nameOr(names map[string]string, id string) string {
	if n, ok := names[id]; ok {
		return n
	}
	return id
}

// Refreshing pages without script: a page whose session chose so answers
// with a Refresh header (the browser loads the page again after that many
// seconds; the CSP does not restrict it). The choice is a cookie the
// toggle's POST sets, so it follows the operator from page to page.

const (
	refreshCookie = "osb_console_refresh"
	// RefreshEvery is the seconds between two refreshes of a page.
	RefreshEvery = 30
)

// refreshOf is the refresh interval r's cookie asks for (0: none).
func refreshOf(r *http.Request) int {
	if ck, err := r.Cookie(refreshCookie); err == nil && ck.Value == "on" {
		return RefreshEvery
	}
	return 0
}

// refreshToggle turns the pages' refresh on or off (a POST behind the
// session and its CSRF token) and goes back to the page it was asked from.
func (c *Console) refreshToggle(w http.ResponseWriter, r *http.Request) {
	r, _, ok := c.actionForm(w, r)
	if !ok {
		return
	}
	ck := &http.Cookie{Name: refreshCookie, Value: "on", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: c.o.Secure || r.TLS != nil}
	msg := "The pages refresh themselves every " + strconv.Itoa(RefreshEvery) + " seconds."
	if r.PostForm.Get("refresh") != "on" {
		ck.Value, ck.MaxAge, msg = "", -1, "The pages no longer refresh themselves."
	}
	http.SetCookie(w, ck)
	redirectBack(w, r, safeNext(r.PostForm.Get("back")), msg, nil)
}

// withoutOutcome is u's path and query without the outcome of an action
// (flash, error).
func withoutOutcome(u *url.URL) string {
	q := u.Query()
	q.Del("flash")
	q.Del("error")
	if len(q) == 0 {
		return u.EscapedPath()
	}
	return u.EscapedPath() + "?" + q.Encode()
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

// actionError is what an action's page says of err: an OSB error's
// description (it names what was expected), else a generic line.
func actionError(err error) error {
	var e *osb.Error
	if errors.As(err, &e) && e.Description != "" {
		return errors.New(e.Description)
	}
	return stateError("the action", err)
}

// planName is a plan's own name from CatalogNames ("service/plan"), else
// id.
func planName(names map[string]string, id string) string {
	n := nameOr(names, id)
	if _, ok := names[id]; ok {
		if i := strings.LastIndexByte(n, '/'); i >= 0 {
			return n[i+1:]
		}
	}
	return n
}

// catalogNames maps service and plan ids to names ("service" and
// "service/plan"): the cached catalogs' (View.CatalogNames), and for an
// id a drifted catalog no longer has (a removed plan with live instances
// on it), the name the accepted catalog gave it, from the drift report.
func (c *Console) catalogNames(ctx context.Context) map[string]string {
	v := c.o.View
	out := v.CatalogNames()
	reports, err := v.CatalogDrift(ctx)
	if err != nil {
		return out
	}
	for _, r := range reports {
		for _, it := range r.Items {
			if it.OldID == "" {
				continue
			}
			if _, ok := out[it.OldID]; ok {
				continue
			}
			if it.Plan != "" {
				out[it.OldID] = it.Service + "/" + it.Plan
			} else {
				out[it.OldID] = it.Service
			}
		}
	}
	return out
}
