package proxy

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// route is one tenant's access to one broker under a URL prefix.
type route struct {
	prefix string
	tenant *tenant
	up     *upstream
}

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
			s := ScopeFrom(r.Context())
			p := r.URL.EscapedPath()
			if r.URL.Opaque != "" || (r.URL.Host != "" && r.RequestURI != "" && r.RequestURI[0] != '/') {
				// absolute-form and opaque request targets are for proxies, not origins
				s.fail(w, osb.Errorf(http.StatusBadRequest, "", "request target %q is not an origin-form path", r.RequestURI))
				return
			}
			if why := uncleanPath(p); why != "" {
				s.fail(w, osb.Errorf(http.StatusBadRequest, "", "path %q is refused: %s", p, why))
				return
			}
			rt, rest := routes.match(p)
			if rt == nil {
				s.fail(w, osb.Errorf(http.StatusNotFound, "", "no route for path %q: expected /<tenant>/<broker>/v2/...", p))
				return
			}
			s.route, s.Tenant, s.Broker, s.Path = rt, rt.tenant.name, rt.up.name, rest
			next.ServeHTTP(w, r)
		})
	}
}

// uncleanPath says why the escaped path p may not be routed, or "".
func uncleanPath(p string) string {
	if p == "" || p[0] != '/' {
		return "it does not start with \"/\""
	}
	if strings.Contains(p, "//") {
		return "it has an empty segment (\"//\")"
	}
	if strings.IndexByte(p, '\\') >= 0 {
		return "it contains a backslash"
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if isDotSegment(seg) {
			return fmt.Sprintf("it has a dot segment (%q)", seg)
		}
		if i := strings.IndexByte(seg, '%'); i >= 0 {
			if why := badEscape(seg[i:]); why != "" {
				return why
			}
		}
	}
	return ""
}

// isDotSegment reports whether seg is "." or "..", literally or
// percent-encoded ("%2e", "%2E%2e", ".%2e").
func isDotSegment(seg string) bool {
	if len(seg) > 6 {
		return false
	}
	s := strings.ReplaceAll(strings.ReplaceAll(seg, "%2e", "."), "%2E", ".")
	return s == "." || s == ".."
}

// badEscape refuses encoded separators: "%2f", "%5c" and "%00".
func badEscape(s string) string {
	for {
		i := strings.IndexByte(s, '%')
		if i < 0 || i+3 > len(s) {
			return ""
		}
		switch strings.ToLower(s[i+1 : i+3]) {
		case "2f":
			return "it contains an encoded slash (\"%2f\")"
		case "5c":
			return "it contains an encoded backslash (\"%5c\")"
		case "00":
			return "it contains an encoded NUL (\"%00\")"
		}
		s = s[i+3:]
	}
}
