package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// controlFunc serves one /admin/ route for the gateway in force: it returns
// the body of a 200 answer and, in a few words, what it did; or an error,
// which becomes an OSB error answer (an error that is not an *osb.Error
// becomes a generic 500; its text only reaches the log).
type controlFunc func(r *http.Request, g *Gateway) (body any, did string, err error)

// bind gives a the gateway and the logger of its control routes. Every
// Mount method passes the same Switch.
func (a *Admin) bind(sw *Switch, log *slog.Logger) {
	if a.sw != nil && a.sw != sw {
		panic("proxy: Admin control routes mounted from two Switches")
	}
	a.sw = sw
	if log != nil {
		a.log = log
	}
}

// handleControl adds a control route; pattern must be under /admin/.
func (a *Admin) handleControl(pattern string, fn controlFunc) {
	a.ctl.Handle(pattern, a.control(pattern, fn))
	a.routes = append(a.routes, pattern)
}

// control wraps every /admin/ route: it checks the bearer token against
// admin.token, runs fn, writes its answer or error (one JSON error shape,
// osb.WriteError) and logs one line with the method, route, the path
// values (broker, instance, orphan), who, the status and what happened —
// reads at info, changes and refusals at warn. The token is never logged.
func (a *Admin) control(pattern string, fn controlFunc) http.Handler {
	route, wildcards := pattern, patternWildcards(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var g *Gateway
		if a.sw != nil {
			g = a.sw.Load()
		}
		var body any
		var did string
		err := authorize(g, r)
		if err == nil {
			body, did, err = fn(r, g)
		}
		status, e := http.StatusOK, (*osb.Error)(nil)
		if err != nil {
			e = osb.AsError(err)
			status, did = e.Status, e.Description
		}
		// Logged before the answer is written: what was done is on record
		// even when the client is gone.
		a.logCall(r, route, wildcards, status, did, e)
		if e != nil {
			osb.WriteError(w, e)
			return
		}
		writeJSON(w, status, body)
	})
}

// logCall logs one admin call: reads at info, changes and refusals at
// warn; e, when set, is the error answered, and its cause is logged.
func (a *Admin) logCall(r *http.Request, route string, wildcards []string, status int, did string, e *osb.Error) {
	level := slog.LevelInfo
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || status == http.StatusUnauthorized || status == http.StatusForbidden {
		level = slog.LevelWarn
	}
	attrs := make([]slog.Attr, 0, 9)
	attrs = append(attrs, slog.String("method", r.Method), slog.String("route", route))
	for _, name := range wildcards {
		attrs = append(attrs, slog.String(name, r.PathValue(name)))
	}
	attrs = append(attrs, slog.String("who", operator(r)), slog.Int("status", status), slog.String("outcome", did))
	if e != nil && e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	a.log.LogAttrs(r.Context(), level, "admin call", attrs...)
}

// patternWildcards returns the wildcard names of a ServeMux pattern.
func patternWildcards(pattern string) []string {
	var names []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			name = strings.TrimSuffix(strings.TrimSuffix(name, "}"), "...")
			if name != "$" {
				names = append(names, name)
			}
		}
	}
	return names
}

// adminChallenge is the WWW-Authenticate header of a 401 from /admin/.
var adminChallenge = http.Header{"Www-Authenticate": {`Bearer realm="osb-gateway admin"`}}

// authorize checks r's bearer token against g's admin.token in constant
// time: 403 when no token is configured (or no gateway is mounted), 401
// when the request has none or another one.
func authorize(g *Gateway, r *http.Request) error {
	var want string
	if g != nil {
		want = g.cfg.Admin.Token.Reveal()
	}
	if want == "" {
		return osb.Errorf(http.StatusForbidden, "", "admin.token is not set: the /admin/ routes are closed until the configuration sets admin.token or admin.token_file")
	}
	h := r.Header.Get("Authorization")
	scheme, got, _ := strings.Cut(h, " ")
	switch {
	case h == "":
		return &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
			Description: "a bearer token is required: expected Authorization: Bearer <admin.token>, got no Authorization header"}
	case !strings.EqualFold(scheme, "Bearer"):
		return &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
			Description: "a bearer token is required: expected Authorization: Bearer <admin.token>, got " + describeScheme(scheme)}
	case !tokenOK(want, got):
		return &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
			Description: "the bearer token does not match admin.token"}
	}
	return nil
}

// tokenOK compares got with want in constant time (hashed first, so the
// time does not depend on the lengths either).
func tokenOK(want, got string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// describeScheme names an Authorization scheme for an error description
// without echoing anything long or unprintable.
func describeScheme(scheme string) string {
	if scheme == "" || len(scheme) > 20 || strings.ContainsFunc(scheme, func(r rune) bool { return r < '!' || r > '~' }) {
		return "an Authorization header of an unknown scheme"
	}
	return fmt.Sprintf("the %q scheme", scheme)
}

// operator names who made an admin call: the X-Operator header when set,
// and the remote address.
func operator(r *http.Request) string {
	if op := r.Header.Get("X-Operator"); op != "" {
		return op + " from " + r.RemoteAddr
	}
	return r.RemoteAddr
}

// noControlRoute answers a path under /admin/ that no route serves.
func noControlRoute(r *http.Request, _ *Gateway) (any, string, error) {
	return nil, "", osb.Errorf(http.StatusNotFound, "", "no admin route for %s %s: expected one of the routes listed in the admin API section of docs/operating.md", r.Method, r.URL.Path)
}
