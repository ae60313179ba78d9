package proxy

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

func TestRouting(t *testing.T) {
	gw, b1, b2 := twoTenants(t)
	tests := []struct {
		name    string
		path    string
		user    string
		pass    string
		status  int
		broker  *osbtest.Broker // nil: must reach no broker
		brokerP string          // the request URI the broker must see
	}{
		{"t1 to b1", "/t1/b1/v2/service_instances/i/last_operation", t1User, t1Pass, 200, b1, "/v2/service_instances/i/last_operation"},
		{"t1 to b2 with base path", "/t1/b2/v2/service_instances/i/last_operation", t1User, t1Pass, 200, b2, "/base/v2/service_instances/i/last_operation"},
		{"t2 custom prefix", "/platform-two/shared/v2/service_instances/i/last_operation", t2User, t2Pass, 200, b2, "/base/v2/service_instances/i/last_operation"},
		{"query passes unchanged", "/t1/b1/v2/service_instances/i-1/last_operation?operation=o%201&service_id=s%20x&plan_id=p", t1User, t1Pass, 200, b1,
			"/v2/service_instances/i-1/last_operation?operation=o%201&service_id=s%20x&plan_id=p"},
		{"escaped id passes escaped", "/t1/b1/v2/service_instances/a%20b", t1User, t1Pass, 200, b1, "/v2/service_instances/a%20b"},
		{"t2 credentials on t1 route", "/t1/b1/v2/catalog", t2User, t2Pass, 401, nil, ""},
		{"t2 has no route to b1", "/t2/b1/v2/catalog", t2User, t2Pass, 404, nil, ""},
		{"default prefix replaced by custom", "/t2/b2/v2/catalog", t2User, t2Pass, 404, nil, ""},
		{"unknown tenant", "/nobody/b1/v2/catalog", t1User, t1Pass, 404, nil, ""},
		{"prefix without slash", "/t1/b1v2/catalog", t1User, t1Pass, 404, nil, ""},
		{"prefix glued to next segment", "/t1/b12/v2/catalog", t1User, t1Pass, 404, nil, ""},
		{"bare prefix", "/t1/b1", t1User, t1Pass, 404, nil, ""},
		{"tenant only", "/t1", t1User, t1Pass, 404, nil, ""},
		{"admin is not on this listener", "/healthz", t1User, t1Pass, 404, nil, ""},
		{"admin path under a route", "/t1/b1/healthz", t1User, t1Pass, 404, nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n1, n2 := len(b1.Requests()), len(b2.Requests())
			res, body := do(t, "GET", gw.URL+tc.path, tc.user, tc.pass, "2.14", nil)
			if res.StatusCode != tc.status {
				t.Fatalf("status %d, want %d; body %s", res.StatusCode, tc.status, body)
			}
			g1, g2 := len(b1.Requests())-n1, len(b2.Requests())-n2
			switch tc.broker {
			case nil:
				if g1+g2 != 0 {
					t.Fatalf("a broker was reached (b1 %d, b2 %d)", g1, g2)
				}
				if !strings.Contains(body, `"description"`) || res.Header.Get("Content-Type") != "application/json" {
					t.Errorf("refusal is not an OSB error body: %s", body)
				}
			case b1, b2:
				other := g2
				if tc.broker == b2 {
					other = g1
				}
				if other != 0 {
					t.Fatal("the other broker was reached")
				}
				if got := tc.broker.Last(t).RequestURI; got != tc.brokerP {
					t.Errorf("broker saw %q, want %q", got, tc.brokerP)
				}
			}
		})
	}
}

// TestPathTricks sends hostile request targets over a raw socket, so no
// client library normalises them first. None may reach a broker.
func TestPathTricks(t *testing.T) {
	gw, b1, b2 := twoTenants(t)
	addr := gw.Listener.Addr().String()
	auth := "Authorization: Basic dDEtdXNlcjp0MS1wYXNz\r\n" // t1-user:t1-pass
	tests := []struct {
		name   string
		target string
		host   string
		status int
	}{
		{"dot dot into other tenant", "/t1/b2/../../t2/b2/v2/catalog", "gw", 400},
		{"dot dot into other broker", "/t1/b2/../b1/v2/catalog", "gw", 400},
		{"encoded dots", "/t1/b2/%2e%2e/%2E%2e/platform-two/shared/v2/catalog", "gw", 400},
		{"half encoded dots", "/t1/b2/.%2e/b1/v2/catalog", "gw", 400},
		{"single dot", "/t1/./b1/v2/catalog", "gw", 400},
		{"encoded slash in prefix", "/t1%2fb1/v2/catalog", "gw", 400},
		{"encoded slash after prefix", "/t1/b2%2f..%2fb1/v2/catalog", "gw", 400},
		{"encoded backslash", "/t1/b2/..%5cb1/v2/catalog", "gw", 400},
		{"double slash", "/t1//b1/v2/catalog", "gw", 400},
		{"leading double slash", "//t1/b1/v2/catalog", "gw", 400},
		{"absolute form to other tenant", "http://gw/t2/b2/v2/catalog", "gw", 400},
		{"trailing-dot host", "/t2/b1/v2/catalog", "gw.example.com.", 404},
		{"admin via dot dot", "/t1/b1/../../healthz", "gw", 400},
		{"backslash", "/t1/b1\\..\\..\\t2/b2/v2/catalog", "gw", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := len(b1.Requests()) + len(b2.Requests())
			res, body := raw(t, addr, "GET "+tc.target+" HTTP/1.1\r\nHost: "+tc.host+"\r\n"+auth+
				"X-Broker-API-Version: 2.14\r\nConnection: close\r\n\r\n")
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d; body %s", res.StatusCode, tc.status, body)
			}
			if got := len(b1.Requests()) + len(b2.Requests()); got != n {
				t.Errorf("a broker was reached")
			}
			if !strings.HasPrefix(body, `{"description":`) {
				t.Errorf("not an OSB error body: %s", body)
			}
		})
	}
}

func TestRoutingErrorBodies(t *testing.T) {
	gw, _, _ := twoTenants(t)
	addr := gw.Listener.Addr().String()
	for _, tc := range []struct{ name, target string }{
		{"unknown_prefix", "/nobody/b1/v2/catalog"},
		{"dot_segment", "/t1/b1/../b2/v2/catalog"},
		{"encoded_slash", "/t1/b1%2Fv2/catalog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, body := raw(t, addr, "GET "+tc.target+" HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n")
			checkGolden(t, "route_"+tc.name, res, body)
		})
	}
}

func TestRouteTableMatch(t *testing.T) {
	rt := routeTable{"/a/b": {Prefix: "/a/b"}, "/c": {Prefix: "/c"}}
	tests := []struct{ path, prefix, rest string }{
		{"/a/b/v2/catalog", "/a/b", "/v2/catalog"},
		{"/a/b", "/a/b", ""},
		{"/a/bc/v2", "", ""},
		{"/a", "", ""},
		{"/c/v2", "/c", "/v2"},
		{"/cc/v2", "", ""},
		{"/", "", ""},
	}
	for _, tc := range tests {
		r, rest := rt.match(tc.path)
		got := ""
		if r != nil {
			got = r.Prefix
		}
		if got != tc.prefix || rest != tc.rest {
			t.Errorf("match(%q) = %q, %q; want %q, %q", tc.path, got, rest, tc.prefix, tc.rest)
		}
	}
}

var _ = http.StatusOK

func TestUncleanPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		bad  bool
	}{
		{"/t/b/v2/catalog", false},
		{"/t/b/v2/service_instances/a%20b", false},
		{"/t/b/v2/x.y/..z/...", false},
		{"/t/b/", false}, // a trailing slash is left to the router and classifier
		{"", true}, {"t/b", true}, {"//t", true}, {"/t//b", true}, {"/t/./b", true}, {"/t/../b", true},
		{"/t/..", true}, {"/t/.", true}, {"/t/%2e%2E", true}, {"/t/.%2e/x", true}, {"/t/%2e", true},
		{"/t%2fb", true}, {"/t%2Fb", true}, {"/t%5cb", true}, {"/t%00", true}, {"/t\\b", true},
	} {
		if got := uncleanPath(tc.path) != ""; got != tc.bad {
			t.Errorf("uncleanPath(%q) refuses = %v, want %v (%s)", tc.path, got, tc.bad, uncleanPath(tc.path))
		}
	}
}

// uncleanPathRef is uncleanPath as first written, byte by byte: the
// reference the table-driven version must agree with.
func uncleanPathRef(p string) string {
	if p == "" || p[0] != '/' {
		return "it does not start with \"/\""
	}
	segStart := 1
	for i := 1; i <= len(p); i++ {
		if i < len(p) {
			switch p[i] {
			case '/':
			case '\\':
				return "it contains a backslash"
			case '%':
				if why := badEscape(p[i:]); why != "" {
					return why
				}
				continue
			default:
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

func FuzzUncleanPath(f *testing.F) {
	for _, p := range []string{"/t1/b1/v2/catalog", "/t1/../b2", "/t1/%2e%2E/x", "//x", "/a\\b", "/a%2fb", "/a%zz", "/a%", "/.", "/x/.%2e/", "/x/"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		if got, want := uncleanPath(p), uncleanPathRef(p); got != want {
			t.Errorf("uncleanPath(%q) = %q, want %q", p, got, want)
		}
	})
}
