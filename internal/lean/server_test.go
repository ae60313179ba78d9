package lean

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// rawCase is a conversation with a server over one connection.
type rawCase struct {
	name string
	// parts are written in turn; with await, one answer (a 100 Continue
	// or a final one) is read after each part but the last.
	parts []string
	await bool
	// finals is the number of final answers the last part asks for (0: 1).
	finals int
	method string // of the requests, for reading their answers (""; GET)
	// stricter is set where lean refuses by design what net/http serves:
	// the start of lean's description of the refusal.
	stricter string
	// open: the client reads the answers and does not wait for the
	// connection's end.
	open bool
	// differs, where the servers differ by design, checks the two
	// exchanges in the place of a comparison.
	differs func(t *testing.T, std, lean exchange)
	// check, if set, checks lean's exchange further.
	check func(t *testing.T, lean exchange)
}

const (
	get     = "GET /v2/catalog HTTP/1.1\r\nHost: gw\r\n\r\n"
	post    = "POST /v2/service_instances/i1 HTTP/1.1\r\nHost: gw\r\nContent-Length: 11\r\n\r\nhello world"
	chunked = "POST /v2/service_instances/i1 HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
)

// bigHead is a GET whose head is n bytes long or a little longer.
func bigHead(n int) string {
	return "GET /v2/catalog HTTP/1.1\r\nHost: gw\r\nX-Big: " + strings.Repeat("b", n) + "\r\n\r\n"
}

// at is a GET of target (HTTP/1.1, Host gw) with more header lines.
func at(target string, lines ...string) string {
	return "GET " + target + " HTTP/1.1\r\nHost: gw\r\n" + strings.Join(lines, "") + "\r\n"
}

var rawCases = []rawCase{
	// Requests both serve: the handler's descriptions must be byte-equal.
	{name: "get with query", parts: []string{at("/v2/catalog?a=1&b=%20x&c", "X-Broker-API-Version: 2.17\r\n", "x-lower: v\r\n", "X-Multi: 1\r\nX-Multi: 2\r\n")}},
	{name: "keep-alive sequence", parts: []string{get, post, chunked}, await: true},
	{name: "pipelined in one write", parts: []string{get + post + chunked}, finals: 3},
	{name: "HTTP/1.0 closes", parts: []string{"GET /v2/catalog HTTP/1.0\r\n\r\n"}},
	{name: "HTTP/1.0 keep-alive", parts: []string{"GET /v2/catalog HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /x/small HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"}, finals: 2},
	{name: "HTTP/1.1 Connection: close", parts: []string{"GET /v2/catalog HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n"}},
	{name: "Content-Length body", parts: []string{post}},
	{name: "chunked body", parts: []string{chunked}},
	{name: "chunked body with trailer, then a request", parts: []string{strings.TrimSuffix(chunked, "\r\n") + "X-Sum: 1\r\n\r\n" + get}, finals: 2},
	{name: "chunked, upper-case coding and extension", parts: []string{"PUT / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: Chunked\r\n\r\n3;ext=1\r\nabc\r\n0\r\n\r\n"}},
	{name: "bad chunk size", parts: []string{"PUT / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n"}},
	// The body goes only after the 100 Continue, which the handler's
	// first read sends.
	{name: "Expect: 100-continue, body read", await: true, parts: []string{
		"PUT /v2/service_instances/i1 HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", "hello"},
		check: func(t *testing.T, x exchange) {
			if len(x.Answers) != 2 || x.Answers[0].Status != http.StatusContinue || x.Answers[1].Status != http.StatusOK {
				t.Errorf("lean: %+v, want 100 Continue, then 200", x)
			}
		}},
	// The handler does not read: no 100 Continue, and the answer says
	// Connection: close (the client may never send the body). lean then
	// closes at once; net/http waits to read the body first (until
	// ReadTimeout), so the client does not wait for the end.
	{name: "Expect: 100-continue, body unread", open: true, parts: []string{
		"PUT /x/noread HTTP/1.1\r\nHost: gw\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"},
		check: func(t *testing.T, x exchange) {
			if len(x.Answers) != 1 || x.Answers[0].Status != http.StatusOK || !x.Answers[0].Close {
				t.Errorf("lean: %+v, want only 200 with Connection: close", x)
			}
		}},
	{name: "Expect: 100-continue without a body", parts: []string{at("/v2/catalog", "Expect: 100-continue\r\n")}},
	{name: "Expect: 100-continue on HTTP/1.0", parts: []string{"PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nhi"}},
	{name: "unknown Expect", parts: []string{at("/v2/catalog", "Expect: teapot\r\n")}},
	// HTTP/0.9's request line has no version: net/http refuses it as
	// soon as the line is read, without waiting for a head's end.
	{name: "HTTP/0.9 request line", parts: []string{"GET /\r\n"}},
	{name: "missing Host on 1.1", parts: []string{"GET /v2/catalog HTTP/1.1\r\n\r\n"}},
	{name: "two Host headers", parts: []string{at("/v2/catalog", "Host: gw\r\n")}},
	{name: "bad Host", parts: []string{"GET / HTTP/1.1\r\nHost: g w\r\n\r\n"}},
	{name: "empty Host", parts: []string{"GET / HTTP/1.1\r\nHost:\r\n\r\n"}},
	{name: "Host with port and IPv6", parts: []string{"GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"}},
	{name: "absolute-form target", parts: []string{"GET http://broker.example:8080/v2/catalog?x=1 HTTP/1.1\r\nHost: other\r\n\r\n"}},
	{name: "absolute-form of another scheme", parts: []string{"GET p: HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "asterisk target", parts: []string{"OPTIONS * HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "relative target", parts: []string{"GET v2/catalog HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "escaped slash in path", parts: []string{at("/v2/service_instances/a%2Fb/service_bindings/c")}},
	{name: "escaped letters in path", parts: []string{at("/v2/%63atalog")}},
	{name: "bad escape in path", parts: []string{at("/v2/a%zz")}},
	{name: "path with !", parts: []string{at("/v2/service_instances/a!b")}},
	{name: "path with '", parts: []string{at("/v2/service_instances/a'b")}},
	{name: "path with () * and space-free query", parts: []string{at("/v2/(a)*b?q='x'!")}},
	{name: "non-ASCII path", parts: []string{at("/v2/caf\xc3\xa9")}},
	{name: "control byte in target", parts: []string{at("/v2/a\x01b")}},
	{name: "bare LF line endings", parts: []string{"GET /v2/catalog HTTP/1.1\nHost: gw\nX-A: 1\n\n"}},
	{name: "mixed line endings", parts: []string{"GET /v2/catalog HTTP/1.1\r\nHost: gw\nX-A: 1\r\n\n"}},
	{name: "lower-case and odd field names", parts: []string{at("/", "x-broker-api-version: 2.17\r\n", "x_under: 1\r\n", "X-#!'*+.^`|~: 2\r\n")}},
	{name: "space in field name", parts: []string{at("/", "X A: 1\r\n")}},
	{name: "space before colon", parts: []string{at("/", "X-A : 1\r\n")}},
	{name: "control byte in field name", parts: []string{at("/", "X\x01A: 1\r\n")}},
	{name: "( in field name", parts: []string{at("/", "X(A: 1\r\n")}},
	{name: "no colon", parts: []string{at("/", "X-A 1\r\n")}},
	{name: "empty field name", parts: []string{at("/", ": 1\r\n")}},
	{name: "control byte in value", parts: []string{at("/", "X-A: a\x01b\r\n")}},
	{name: "DEL in value", parts: []string{at("/", "X-A: a\x7fb\r\n")}},
	{name: "NUL in value", parts: []string{at("/", "X-A: a\x00b\r\n")}},
	{name: "CR in value", parts: []string{at("/", "X-A: a\rb\r\n")}},
	{name: "tab and obs-text in value, padding trimmed", parts: []string{at("/", "X-A: \t a\tb caf\xe9 \t\r\n", "X-Empty:\r\n", "X-Spaces:   \r\n")}},
	{name: "Pragma: no-cache", parts: []string{at("/", "Pragma: no-cache\r\n")}},
	{name: "Connection tokens", parts: []string{at("/", "Connection: keep-alive, Close\r\n")}},
	{name: "duplicate identical Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc"}},
	{name: "differing Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd"}},
	{name: "Content-Length list", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3, 3\r\n\r\nabc"}},
	{name: "negative Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: -1\r\n\r\n"}},
	{name: "invalid Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 3a\r\n\r\nabc"}},
	{name: "Content-Length with plus", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: +3\r\n\r\nabc"}},
	{name: "Content-Length padded", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length:  3 \r\n\r\nabc"}},
	{name: "Content-Length 0 on GET", parts: []string{at("/", "Content-Length: 0\r\n")}},
	{name: "huge Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nContent-Length: 99999999999999999999\r\n\r\n"}},
	{name: "unsupported transfer coding", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: gzip\r\n\r\n"}},
	{name: "two transfer codings", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n"}},
	{name: "two Transfer-Encoding lines", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"}},
	{name: "head longer than MaxHeaderBytes", parts: []string{bigHead(16 << 10)}},
	{name: "head longer than the 4 KiB buffer, under the limit", parts: []string{bigHead(6 << 10)}},
	{name: "head in two writes", parts: []string{"GET /v2/catalog?x=1 HTTP/1.1\r\nHo", "st: gw\r\nX-A: 1\r\n\r\n"}},
	{name: "head of two writes split in CRLF", parts: []string{"GET /v2/catalog HTTP/1.1\r\nHost: gw\r", "\n\r\n"}},
	{name: "HTTP/1.3 served as 1.1", parts: []string{"GET / HTTP/1.3\r\nHost: gw\r\n\r\n" + get}, finals: 2},
	{name: "HTTP/1.3 without Host", parts: []string{"GET / HTTP/1.3\r\n\r\n"}},
	{name: "empty Expect", parts: []string{at("/", "Expect:\r\n")}},
	{name: "100-continue in a list", await: true, parts: []string{"PUT / HTTP/1.1\r\nHost: gw\r\nExpect: foo, 100-Continue\r\nContent-Length: 2\r\n\r\n", "hi"}},
	{name: "chunked trailer ends in bare LF", parts: []string{strings.TrimSuffix(chunked, "\r\n") + "\n" + get}, finals: 2},
	{name: "chunked trailer malformed", parts: []string{strings.TrimSuffix(chunked, "\r\n") + "bad\r\n\r\n"}},
	{name: "HTTP/2.0 version", parts: []string{"GET / HTTP/2.0\r\nHost: gw\r\n\r\n"}},
	{name: "malformed version", parts: []string{"GET / HTTP/1.x\r\nHost: gw\r\n\r\n"}},
	{name: "lower-case version", parts: []string{"GET / http/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "no version", parts: []string{"GET /\r\nHost: gw\r\n\r\n"}},
	{name: "odd method token", parts: []string{at("/", "")[:0] + "M-SEARCH / HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "bad method", parts: []string{"G(T / HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "double space in request line", parts: []string{"GET  / HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "leading empty line", parts: []string{"\r\n" + get}},
	// Malformed request lines (see malformedLines, each sent alone too).
	{name: "trailing space, no version", parts: []string{"GET / \r\nHost: gw\r\n\r\n"}},
	{name: "a word after the version", parts: []string{"GET / HTTP/1.1 extra\r\nHost: gw\r\n\r\n"}},
	{name: "tabs for spaces", parts: []string{"GET\t/\tHTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "leading space", parts: []string{" GET / HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	{name: "leading bare LF", parts: []string{"\n" + get}},
	// After a POST net/http drops up to 4 CR and LF bytes before the next
	// request line (RFC 9112 §2.2: old clients send a CRLF after a body).
	{name: "CRLF after a POST's body", parts: []string{post + "\r\n" + get}, finals: 2},
	{name: "LF after a POST's body, then a POST", parts: []string{post + "\n" + post + "\r\n\r\n" + get}, finals: 3},
	{name: "five CRLF bytes after a POST's body", parts: []string{post + "\r\n\r\n\n" + get}, finals: 2},
	{name: "CRLF after a PUT's body", parts: []string{strings.Replace(post, "POST", "PUT", 1) + "\r\n" + get}, finals: 2},
	{name: "CR before CRLF", parts: []string{"GET / HTTP/1.1\r\r\nHost: gw\r\n\r\n"}},
	{name: "relative target, HTTP/2.0", parts: []string{"GET v2 HTTP/2.0\r\nHost: gw\r\n\r\n"}},
	{name: "CONNECT to a bad authority", parts: []string{"CONNECT [::1 HTTP/1.1\r\nHost: gw\r\n\r\n"}},
	// Well-formed lines on their own: neither server answers before the
	// rest of the head has come.
	{name: "lower-case method, head in two writes", parts: []string{"get /v2/catalog HTTP/1.1\r\n", "Host: gw\r\n\r\n"}},
	{name: "HTTP/1.3, head in two writes", parts: []string{"GET / HTTP/1.3\r\n", "Host: gw\r\n\r\n"}},
	{name: "escaped target, head in two writes", parts: []string{"GET /v2/%63atalog?a=%20 HTTP/1.1\r\n", "Host: gw\r\n\r\n"}},
	{name: "absolute target, head in two writes", parts: []string{"GET http://gw/v2/catalog HTTP/1.1\r\n", "Host: gw\r\n\r\n"}},

	// Answers: the handlers' behaviours, framed by each server.
	{name: "HEAD keeps Content-Length, no body", parts: []string{"HEAD /v2/catalog HTTP/1.1\r\nHost: gw\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "204", parts: []string{at("/x/204") + get}, finals: 2},
	{name: "304", parts: []string{at("/x/304") + get}, finals: 2},
	{name: "304 with the handler's Content-Length", parts: []string{at("/x/304cl") + get}, finals: 2},
	{name: "204 with the handler's Content-Length", parts: []string{at("/x/204cl") + get}, finals: 2},
	{name: "HEAD, long answer", parts: []string{"HEAD /x/large HTTP/1.1\r\nHost: gw\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "HEAD, sniffed", parts: []string{"HEAD /x/sniff HTTP/1.1\r\nHost: gw\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "HEAD, nothing written", parts: []string{"HEAD /x/204 HTTP/1.1\r\nHost: gw\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "HEAD, Content-Length longer than written", parts: []string{"HEAD /x/short HTTP/1.1\r\nHost: gw\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "HEAD on HTTP/1.0 keep-alive", parts: []string{"HEAD /x/large HTTP/1.0\r\nConnection: keep-alive\r\n\r\n" + get}, method: http.MethodHead, finals: 2},
	{name: "no Content-Length, short answer", parts: []string{at("/x/small") + get}, finals: 2},
	{name: "no Content-Length, long answer: chunked", parts: []string{at("/x/large") + get}, finals: 2},
	{name: "no Content-Length, long answer to HTTP/1.0: close-delimited", parts: []string{"GET /x/large HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"}},
	{name: "Content-Length longer than written: closed", parts: []string{at("/x/short") + get}, finals: 2},
	{name: "writing past Content-Length: ErrContentLength", parts: []string{at("/x/long") + get}, finals: 2},
	{name: "Connection: close from the handler", parts: []string{at("/x/close") + get}, finals: 2},
	{name: "early Flush: chunked", parts: []string{at("/x/flush") + get}, finals: 2},
	{name: "early Flush on HTTP/1.0", parts: []string{"GET /x/flush HTTP/1.0\r\n\r\n"}},
	{name: "Content-Type sniffed", parts: []string{at("/x/sniff")}},
	{name: "103 Early Hints", parts: []string{at("/x/103") + get}, finals: 2},
	// By design: "A server MUST NOT send a 1xx response to an HTTP/1.0
	// client" (RFC 9110 §15.2); net/http does.
	{name: "103 Early Hints to HTTP/1.0: dropped", parts: []string{"GET /x/103 HTTP/1.0\r\n\r\n"},
		differs: func(t *testing.T, std, lean exchange) {
			if len(std.Answers) != 2 || std.Answers[0].Status != http.StatusEarlyHints {
				t.Fatalf("net/http: %+v, want a 103 and a 200", std)
			}
			std.Answers = std.Answers[1:]
			if diff := cmp.Diff(std, lean); diff != "" {
				t.Errorf("lean differs from net/http but for its 103 (-net/http +lean):\n%s", diff)
			}
		}},
	{name: "small unread body drained", parts: []string{"POST /x/noread HTTP/1.1\r\nHost: gw\r\nContent-Length: 5\r\n\r\nhello" + get}, finals: 2},

	// Deliberately stricter: net/http serves these, lean refuses them.
	{name: "folded header line", parts: []string{at("/", "X-A: 1\r\n 2\r\n")}, stricter: "folded header line"},
	{name: "folded header line with tab", parts: []string{at("/", "X-A: 1\r\n\t2\r\n")}, stricter: "folded header line"},
	{name: "Transfer-Encoding with Content-Length", parts: []string{"POST / HTTP/1.1\r\nHost: gw\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		stricter: "both Transfer-Encoding and Content-Length"},
	{name: "Transfer-Encoding on HTTP/1.0", parts: []string{"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"},
		stricter: "Transfer-Encoding on an HTTP/1.0 request"},
	{name: "CONNECT", parts: []string{"CONNECT broker.example:443 HTTP/1.1\r\nHost: broker.example:443\r\n\r\n"}, stricter: "CONNECT is not served"},
}

// TestServerConformance sends each rawCase to a lean.Server and an
// http.Server with the same handler and compares what a client reads.
func TestServerConformance(t *testing.T) {
	s := startServers(t, http.HandlerFunc(testHandler), nil)
	for _, c := range rawCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			finals := max(c.finals, 1)
			std, lean := converse(t, s.std, c), converse(t, s.lean, c)
			if c.check != nil {
				c.check(t, lean)
			}
			switch {
			case c.stricter != "":
				if std.refused(finals) {
					t.Fatalf("net/http refused it too: %+v", std)
				}
				if !lean.refused(finals) {
					t.Fatalf("lean served it: %+v", lean)
				}
				last := lean.Answers[len(lean.Answers)-1]
				if d := leanRefusal(t, last); !strings.HasPrefix(d, c.stricter) {
					t.Errorf("lean's refusal says %q, want it to start with %q", d, c.stricter)
				}
			case std.refused(finals):
				if !lean.refused(finals) {
					t.Fatalf("net/http refused it (%+v), lean served it: %+v", std, lean)
				}
				for _, a := range lean.Answers {
					if a.refusal() {
						leanRefusal(t, a)
					}
				}
				if s, l := lastStatus(std), lastStatus(lean); s != l {
					t.Errorf("lean refuses with status %d, net/http with %d", l, s)
				}
			case c.differs != nil:
				c.differs(t, std, lean)
			default:
				if diff := cmp.Diff(std, lean); diff != "" {
					t.Errorf("%q: lean differs from net/http (-net/http +lean):\n%s", firstLine(c.parts[0]), diff)
				}
			}
		})
	}
}

// converse has the conversation c with the server at addr.
func converse(t *testing.T, addr string, c rawCase) exchange {
	conn := dial(t, addr)
	defer conn.Close()
	br := bufio.NewReader(conn)
	method := c.method
	if method == "" {
		method = http.MethodGet
	}
	var x exchange
	for i, p := range c.parts {
		if _, err := io.WriteString(conn, p); err != nil {
			t.Logf("writing part %d: %v", i, err)
		}
		if c.await && i < len(c.parts)-1 {
			y := readAnswers(br, 0, method, true)
			x.Answers = append(x.Answers, y.Answers...)
			if y.Ended {
				x.Ended = true
				return x
			}
		}
	}
	y := readAnswers(br, max(c.finals, 1), method, !c.open)
	x.Answers, x.Ended = append(x.Answers, y.Answers...), y.Ended
	return x
}

func lastStatus(x exchange) int {
	if len(x.Answers) == 0 {
		return 0
	}
	return x.Answers[len(x.Answers)-1].Status
}

// malformedLines are request lines net/http's server refuses as soon as
// it has read them, before the fields (http.readRequest: the line's
// shape, the method, the version's syntax, the target).
var malformedLines = []struct{ name, line string }{
	{"HTTP/0.9", "GET /\r\n"},
	{"HTTP/0.9, bare LF", "GET /\n"},
	{"trailing space, no version", "GET / \r\n"},
	{"method only", "GET\r\n"},
	{"a word after the version", "GET / HTTP/1.1 extra\r\n"},
	{"two spaces after the method", "GET  / HTTP/1.1\r\n"},
	{"two spaces before the version", "GET /  HTTP/1.1\r\n"},
	{"leading space", " GET / HTTP/1.1\r\n"},
	{"tabs for spaces", "GET\t/\tHTTP/1.1\r\n"},
	{"a tab before the version", "GET /\tHTTP/1.1\r\n"},
	{"bare CRLF", "\r\n"},
	{"bare LF", "\n"},
	{"bad method", "G(T / HTTP/1.1\r\n"},
	{"NUL in method", "G\x00T / HTTP/1.1\r\n"},
	{"malformed version", "GET / HTTP/1.x\r\n"},
	{"lower-case version", "GET / http/1.1\r\n"},
	{"version without a dot", "GET / HTTP/11\r\n"},
	{"CR before CRLF", "GET / HTTP/1.1\r\r\n"},
	{"relative target", "GET v2/catalog HTTP/1.1\r\n"},
	{"control byte in target", "GET /a\x01b HTTP/1.1\r\n"},
	{"bad IPv6 host in target", "GET http://[::1/ HTTP/1.1\r\n"},
	{"relative target, HTTP/2.0", "GET v2 HTTP/2.0\r\n"},
	{"CONNECT to a bad authority", "CONNECT [::1 HTTP/1.1\r\n"},
}

// TestMalformedRequestLineAnsweredAtOnce: a malformed request line, sent
// alone on a connection the client keeps open, gets the answer net/http
// gives (400, and the connection's end) as soon as the line has come, not
// the silent close at ReadHeaderTimeout (an hour here: the exchange's
// deadline, 10 s, ends first and fails the row). lean stayed silent on
// "GET / \r\n" and every line of two spaces.
func TestMalformedRequestLineAnsweredAtOnce(t *testing.T) {
	s := startServers(t, http.HandlerFunc(testHandler), func(std *http.Server, l *Server) {
		std.ReadHeaderTimeout, l.ReadHeaderTimeout = time.Hour, time.Hour
	})
	answer := func(t *testing.T, addr, line string) exchange {
		conn := dial(t, addr)
		defer conn.Close()
		if _, err := io.WriteString(conn, line); err != nil {
			t.Fatal(err)
		}
		return readAnswers(bufio.NewReader(conn), 1, http.MethodGet, true)
	}
	for _, c := range malformedLines {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			std, lean := answer(t, s.std, c.line), answer(t, s.lean, c.line)
			if len(std.Answers) != 1 || std.Answers[0].Status != http.StatusBadRequest || !std.Ended {
				t.Fatalf("net/http: %+v, want 400 and the connection's end", std)
			}
			if len(lean.Answers) != 1 || lean.Answers[0].Status != std.Answers[0].Status || !lean.Ended {
				t.Fatalf("lean: %+v, want %d and the connection's end, as net/http", lean, std.Answers[0].Status)
			}
			leanRefusal(t, lean.Answers[0])
		})
	}
}
