package proxy

import (
	"fmt"
	"net/http"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/upstream"
)

// route is one tenant's access to one broker under a URL prefix
// (core.Route); its parts are read through their owners' accessors
// (upstream.Of, auth.TenantOf, catalog.FilterOf, routes.MigrationOf,
// routes.IDsOf, guard.Of, and the protection's).
type route = core.Route

// routeTable maps clean prefixes ("/cf-prod/mysql") to routes. Config
// validation guarantees no prefix is a segment-wise ancestor of another, so
// at most one route matches a path.
type routeTable map[string]*route

// match finds the route whose prefix is a whole-segment prefix of the
// escaped path p, and returns it with the rest of p ("" or "/…").
func (t routeTable) match(p string) (*route, string) {
	for i := 1; i <= len(p); i++ {
		if i < len(p) && p[i] != '/' {
			continue
		}
		if rt, ok := t[p[:i]]; ok {
			return rt, p[i:]
		}
	}
	return nil, ""
}

// withRoute is the route stage: it checks the path is clean, finds the
// tenant and broker by prefix and records the path with the prefix stripped.
// Only the escaped path is looked at, so "%2f" or "%2e%2e" can never be
// decoded into a separator or a dot segment that crosses routes.
func withRoute(routes routeTable) Middleware {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s := ScopeOf(w, r)
			p := r.URL.EscapedPath()
			if r.URL.Opaque != "" || (r.URL.Host != "" && r.RequestURI != "" && r.RequestURI[0] != '/') {
				// absolute-form and opaque request targets are for proxies, not origins
				s.FailUnread(w, r, osb.Errorf(http.StatusBadRequest, "", "request target %q is not an origin-form path", r.RequestURI))
				return
			}
			if why := uncleanPath(p); why != "" {
				s.FailUnread(w, r, osb.Errorf(http.StatusBadRequest, "", "path %q is refused: %s", p, why))
				return
			}
			rt, rest := routes.match(p)
			if rt == nil {
				s.FailUnread(w, r, osb.Errorf(http.StatusNotFound, "", "no route for path %q: expected /<tenant>/<broker>/v2/...", p))
				return
			}
			s.Route, s.Tenant, s.Broker, s.Path = rt, auth.TenantOf(rt).Name, upstream.Of(rt).Name, rest
			next.ServeHTTP(w, r)
		})
	}
}

// pathSpecial marks the bytes uncleanPath looks at: the rest are skipped.
var pathSpecial = [256]bool{'/': true, '\\': true, '%': true}

// uncleanPath says why the escaped path p may not be routed, or "". It
// refuses empty segments, dot segments (literal or percent-encoded),
// backslashes and encoded separators, in one pass without allocating.
func uncleanPath(p string) string {
	if p == "" || p[0] != '/' {
		return "it does not start with \"/\""
	}
	segStart := 1
	for i := 1; i <= len(p); i++ {
		for i < len(p) && !pathSpecial[p[i]] {
			i++
		}
		if i < len(p) {
			switch p[i] {
			case '\\':
				return "it contains a backslash"
			case '%':
				if why := badEscape(p[i:]); why != "" {
					return why
				}
				continue
			}
		}
		seg := p[segStart:i]
		if seg == "" && i < len(p) {
			return "it has an empty segment (\"//\")"
		}
		if isDotSegment(seg) {
			return fmt.Sprintf("it has a dot segment (%q)", seg)
		}
		segStart = i + 1
	}
	return ""
}

// isDotSegment reports whether seg is "." or "..", literally or
// percent-encoded ("%2e", "%2E%2e", ".%2e").
func isDotSegment(seg string) bool {
	dots := 0
	for i := 0; i < len(seg); {
		switch {
		case seg[i] == '.':
			i++
		case i+3 <= len(seg) && seg[i] == '%' && seg[i+1] == '2' && (seg[i+2] == 'e' || seg[i+2] == 'E'):
			i += 3
		default:
			return false
		}
		dots++
	}
	return dots == 1 || dots == 2
}

// badEscape says why the escape at the start of s is refused: "%2f",
// "%5c" and "%00" encode separators or NUL.
func badEscape(s string) string {
	if len(s) < 3 {
		return ""
	}
	switch {
	case s[1] == '2' && (s[2] == 'f' || s[2] == 'F'):
		return "it contains an encoded slash (\"%2f\")"
	case s[1] == '5' && (s[2] == 'c' || s[2] == 'C'):
		return "it contains an encoded backslash (\"%5c\")"
	case s[1] == '0' && s[2] == '0':
		return "it contains an encoded NUL (\"%00\")"
	}
	return ""
}

// newRoute is tenant t's route (t nil: none) under prefix to the broker of
// upstream u, with what the core and the stages read of them without the
// upstream: the broker's settings, its maximum version as forwarded, the
// tenant's status for a missing version.
func newRoute(prefix string, t *auth.Tenant, u *upstream.Upstream) *route {
	rt := upstream.Route(u)
	rt.Prefix = prefix
	if t != nil {
		rt.Tenant, rt.MissingVersionStatus = t, t.MissingStatus
	}
	return rt
}
