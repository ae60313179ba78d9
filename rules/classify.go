package rules

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/osb-gateway/osb-gateway/internal/osb"
)

// Call is one classified OSB request: which endpoint it calls, on which
// instance and binding, and the query parameters the gateway acts on.
// String fields hold decoded values; they are empty when the path or query
// does not carry them.
type Call struct {
	// Endpoint is the operation called; never Unknown for a classified call.
	Endpoint Endpoint
	// InstanceID is the decoded :instance_id; empty for Catalog.
	InstanceID string
	// BindingID is the decoded :binding_id; empty unless Endpoint.Binding().
	BindingID string
	// AcceptsIncomplete is true when the query has accepts_incomplete=true.
	AcceptsIncomplete bool
	// ServiceID is the decoded service_id query parameter.
	ServiceID string
	// PlanID is the decoded plan_id query parameter.
	PlanID string
	// Operation is the decoded operation query parameter.
	Operation string
}

// MaxIDLength is the longest instance or binding id, in bytes after
// percent-decoding, that Classify accepts.
const MaxIDLength = 255

// maxEchoedPath is how much of an unknown path a 404 description repeats.
const maxEchoedPath = 200

// Classify maps a request to the OSB call it makes. method is the HTTP
// method; path is the request path after the gateway removed its route prefix,
// in escaped form (url.URL.EscapedPath); rawQuery is url.URL.RawQuery.
//
// Errors are *osb.Error values:
//   - 404 when the path is no OSB endpoint, including trailing slashes and
//     paths with extra segments;
//   - 405 with an Allow header when the path is known but the method is not
//     (HEAD and OPTIONS included);
//   - 400 when an id is empty, badly percent-encoded, "." or "..", contains
//     "/" (as %2F), control characters or invalid UTF-8, or is longer than
//     MaxIDLength bytes; and when the query is ambiguous or malformed (see
//     below).
//
// The query is read the way Go's url.ParseQuery reads it, with the
// ambiguities a broker might resolve differently refused: a ";" anywhere, a
// malformed percent-escape anywhere, a repeated accepts_incomplete,
// service_id, plan_id or operation, and an accepts_incomplete other than
// "true" or "false" are 400s. Other parameters are ignored.
//
// Classify does not allocate for requests whose ids and parameters need no
// decoding.
func Classify(method, path, rawQuery string) (Call, error) {
	var segs [maxSegments]string
	r, ok := matchRoute(path, &segs)
	if !ok {
		return Call{}, &osb.Error{
			Status: http.StatusNotFound,
			// Concatenated rather than formatted: fmt's buffer pool made the
			// allocation count vary under -race (TestClassifyAllocs).
			Description: "no OSB endpoint at " + method + " " + truncate(path, maxEchoedPath),
		}
	}
	e := endpointFor(r, method)
	if e == Unknown {
		allow := r.allow()
		return Call{}, &osb.Error{
			Status: http.StatusMethodNotAllowed,
			Description: fmt.Sprintf("method %s is not allowed at %s; the allowed methods are %s",
				method, r.pattern(), allow),
			Header: http.Header{"Allow": {allow}},
		}
	}
	c := Call{Endpoint: e}
	var err error
	for i, p := range routes[r].segs {
		switch p {
		case instanceParam:
			c.InstanceID, err = decodeID("instance id", segs[i])
		case bindingParam:
			c.BindingID, err = decodeID("binding id", segs[i])
		}
		if err != nil {
			return Call{}, err
		}
	}
	if err := parseQuery(rawQuery, &c); err != nil {
		return Call{}, err
	}
	return c, nil
}

// matchRoute splits path after "/v2/" into segs and returns the route whose
// shape it has. It does not allocate.
func matchRoute(path string, segs *[maxSegments]string) (routeID, bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return noRoute, false
	}
	n := 0
	for {
		if n == len(segs) {
			return noRoute, false
		}
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			segs[n] = rest
			n++
			break
		}
		segs[n], rest = rest[:i], rest[i+1:]
		n++
	}
	for r := routeCatalog; int(r) < len(routes); r++ {
		if shapeMatches(routes[r].segs, segs[:n]) {
			return r, true
		}
	}
	return noRoute, false
}

// shapeMatches reports whether segs has the route's shape: the same number of
// segments and the same literal segments. Parameters match anything,
// including the empty string, so that an empty id is a 400 rather than a 404.
func shapeMatches(shape, segs []string) bool {
	if len(shape) != len(segs) {
		return false
	}
	for i, s := range shape {
		if s != instanceParam && s != bindingParam && s != segs[i] {
			return false
		}
	}
	return true
}

// endpointFor returns the endpoint with route r and method, or Unknown.
func endpointFor(r routeID, method string) Endpoint {
	for e, info := range endpoints {
		if info.route == r && info.method == method {
			return Endpoint(e)
		}
	}
	return Unknown
}

// decodeID percent-decodes one escaped path segment and checks that it is a
// usable id. what names the id in error descriptions.
func decodeID(what, seg string) (string, error) {
	// Three escaped bytes decode to at least one: refuse huge segments
	// before decoding them.
	if len(seg) > 3*MaxIDLength {
		return "", badRequest("%s is longer than %d bytes", what, MaxIDLength)
	}
	id, err := pathUnescape(seg)
	if err != nil {
		return "", badRequest("%s %q is not validly percent-encoded", what, seg)
	}
	if err := checkID(what, id); err != nil {
		return "", err
	}
	return id, nil
}

// checkID reports why a decoded id is not acceptable, or nil.
func checkID(what, id string) error {
	switch {
	case id == "":
		return badRequest("%s is empty", what)
	case len(id) > MaxIDLength:
		return badRequest("%s is %d bytes long; the limit is %d", what, len(id), MaxIDLength)
	case id == "." || id == "..":
		return badRequest("%s %q is a dot segment", what, id)
	case strings.IndexByte(id, '/') >= 0:
		return badRequest("%s %q contains \"/\"", what, id)
	}
	for i := 0; i < len(id); {
		r, size := rune(id[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(id[i:])
			if r == utf8.RuneError && size == 1 {
				return badRequest("%s %q is not valid UTF-8", what, id)
			}
		}
		if unicode.IsControl(r) {
			return badRequest("%s %q contains a control character", what, id)
		}
		i += size
	}
	return nil
}

// pathUnescape is url.PathUnescape with a fast path for the common segment
// that has nothing to decode.
func pathUnescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 {
		return s, nil
	}
	return url.PathUnescape(s)
}

// queryUnescape is url.QueryUnescape with a fast path for the common
// parameter that has nothing to decode.
func queryUnescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// badRequest builds a 400 *osb.Error.
func badRequest(format string, args ...any) *osb.Error {
	return osb.Errorf(http.StatusBadRequest, "", format, args...)
}

// truncate shortens s to at most n bytes plus an ellipsis, for echoing
// untrusted input in descriptions.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
