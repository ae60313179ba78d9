package admin

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/tokenlimit"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// handlerFunc serves one /admin/ route over the gateway's view: it
// returns the body of a 200 answer and, in a few words, what it did; or an
// error, which becomes an OSB error answer (an error that is not an
// *osb.Error becomes a generic 500; its text only reaches the log).
type handlerFunc func(r *http.Request, v *proxy.View) (body any, did string, err error)

// handle adds a control route; pattern must be under /admin/.
func (a *Admin) handle(pattern string, fn handlerFunc) {
	a.ctl.Handle(pattern, a.control(pattern, fn))
	a.routes = append(a.routes, pattern)
}

// control wraps every /admin/ route: it checks the bearer token against
// admin.token, runs fn, writes its answer or error (one JSON error shape,
// osb.WriteError) and logs one line with the method, route, the path
// values (broker, instance, orphan), who, the status and what happened —
// reads at info, changes and refusals at warn. The token is never logged.
func (a *Admin) control(pattern string, fn handlerFunc) http.Handler {
	route, wildcards := pattern, patternWildcards(pattern)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body any
		var did string
		limited, err := a.authorize(r)
		if err == nil {
			body, did, err = fn(r, a.view)
		}
		status, e := http.StatusOK, (*osb.Error)(nil)
		if err != nil {
			e = osb.AsError(err)
			status, did = e.Status, e.Description
		}
		// Logged before the answer is written: what was done is on record
		// even when the client is gone.
		a.logControl(r, route, wildcards, status, did, e, limited)
		if e != nil {
			osb.WriteError(w, e)
			return
		}
		writeJSON(w, status, body)
	})
}

// logControl logs a control call with logCall, except a refusal over the
// token limit (limited) that is not the first of its minute from its
// address: the first one logged says how many were not.
func (a *Admin) logControl(r *http.Request, route string, wildcards []string, status int, did string, e *osb.Error, limited *tokenlimit.Refused) {
	switch {
	case limited == nil:
		a.logCall(r, route, wildcards, status, did, e)
	case limited.Log:
		a.logCall(r, route, wildcards, status, did, e, slog.Int("refusals_not_logged", limited.Unlogged),
			slog.String("note", "further refusals over the token limit from this address are logged once a minute"))
	}
}

// logCall logs one admin call: reads at info, changes and refusals at
// warn; e, when set, is the error answered, and its cause is logged.
func (a *Admin) logCall(r *http.Request, route string, wildcards []string, status int, did string, e *osb.Error, more ...slog.Attr) {
	level := slog.LevelInfo
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || status == http.StatusUnauthorized || status == http.StatusForbidden ||
		status == http.StatusTooManyRequests {
		level = slog.LevelWarn
	}
	attrs := make([]slog.Attr, 0, 9+len(more))
	attrs = append(attrs, slog.String("method", r.Method), slog.String("route", route))
	for _, name := range wildcards {
		attrs = append(attrs, slog.String(name, r.PathValue(name)))
	}
	attrs = append(attrs, slog.String("who", operator(r)), slog.Int("status", status), slog.String("outcome", did))
	if e != nil && e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	attrs = append(attrs, more...)
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

// authorize checks r's bearer token against admin.token in constant time:
// 403 when no token is configured (or there is no gateway), 401 when the
// request has none or another one. A token compared and refused counts
// against the client address (a request without one does not: it guesses
// nothing); an address with too many gets 429 with Retry-After and its
// token is not compared: then limited says whether to log the refusal.
func (a *Admin) authorize(r *http.Request) (limited *tokenlimit.Refused, err error) {
	h := r.Header.Get("Authorization")
	scheme, got, _ := strings.Cut(h, " ")
	configured := false
	if a.view != nil {
		_, configured = a.view.AdminTokenHash()
	}
	if !configured {
		return nil, errClosed()
	}
	switch {
	case h == "":
		return nil, &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
			Description: "a bearer token is required: expected Authorization: Bearer <admin.token>, got no Authorization header"}
	case !strings.EqualFold(scheme, "Bearer"):
		return nil, &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
			Description: "a bearer token is required: expected Authorization: Bearer <admin.token>, got " + describeScheme(scheme)}
	}
	attempt, refused, ok := a.tokens.Begin(tokenlimit.Addr(r))
	if !ok {
		return &refused, &osb.Error{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {refused.RetryAfter()}},
			Description: refused.Description()}
	}
	match, configured := a.view.AdminToken(got)
	switch {
	case match:
		attempt.Succeeded()
		return nil, nil
	case !configured: // a reload unset it meanwhile
		attempt.Succeeded()
		return nil, errClosed()
	}
	return nil, &osb.Error{Status: http.StatusUnauthorized, Header: adminChallenge,
		Description: "the bearer token does not match admin.token"}
}

// errClosed answers the /admin/ routes while admin.token is not set.
func errClosed() *osb.Error {
	return osb.Errorf(http.StatusForbidden, "", "admin.token is not set: the /admin/ routes are closed until the configuration sets admin.token or admin.token_file")
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
func noControlRoute(r *http.Request, _ *proxy.View) (any, string, error) {
	return nil, "", osb.Errorf(http.StatusNotFound, "", "no admin route for %s %s: expected one of the routes listed in the admin API section of docs/operating.md", r.Method, r.URL.Path)
}

// storeError is the answer when the state store fails: 503 naming what
// failed; the store's own error goes to the log only.
func storeError(what string, err error) error {
	return &osb.Error{Status: http.StatusServiceUnavailable, Err: err,
		Description: what + " failed: the state store returned an error; the cause is in the gateway's log"}
}
