package lean

import (
	"bufio"
	"bytes"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// deliberate are the starts of lean's descriptions of the requests it
// refuses by design where net/http serves them (Server's doc comment).
var deliberate = []string{
	"folded header line",
	"both Transfer-Encoding and Content-Length",
	"Transfer-Encoding on an HTTP/1.0 request",
	"CONNECT is not served",
}

// FuzzServerRequest sends the fuzzer's bytes as a client's request to a
// lean.Server and an http.Server, on a connection of its own, closed for
// writing after them, and checks the first final answer: when lean's
// handler ran, net/http's ran too and saw the same request; when
// net/http refused, lean refused; lean refuses more only by design; and
// a malformed request line gets net/http's 400 from lean too, even when
// the rest of the head never comes.
func FuzzServerRequest(f *testing.F) {
	for _, c := range rawCases {
		f.Add([]byte(strings.Join(c.parts, "")))
	}
	for _, c := range malformedLines {
		f.Add([]byte(c.line))
	}
	s := startServers(f, http.HandlerFunc(testHandler), nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		std, lean := firstAnswer(t, s.std, data), firstAnswer(t, s.lean, data)
		if line, ok := firstLineOf(data); ok && stdRefusesLine(line) {
			// net/http answers it before reading on: so must lean,
			// whatever follows (nothing, a head cut short, a whole one).
			if std.Status != http.StatusBadRequest {
				t.Fatalf("%q: net/http answered %d to a malformed request line, want 400", data, std.Status)
			}
			if lean.Status != std.Status {
				t.Fatalf("%q: malformed request line: lean answered %d, net/http %d", data, lean.Status, std.Status)
			}
			leanRefusal(t, lean)
			return
		}
		stdRan, leanRan := std.Header.Get(describedBy) != "", lean.Header.Get(describedBy) != ""
		switch {
		case leanRan && !stdRan:
			t.Fatalf("%q: lean served it, net/http refused it: %+v", data, std)
		case leanRan:
			if std.Body != lean.Body {
				t.Fatalf("%q: the handlers saw different requests:\nnet/http: %s\nlean:     %s", data, std.Body, lean.Body)
			}
		case stdRan:
			if !lean.refusal() {
				t.Fatalf("%q: net/http served it, lean closed the connection: %+v", data, lean)
			}
			d := leanRefusal(t, lean)
			for _, p := range deliberate {
				if strings.HasPrefix(d, p) {
					return
				}
			}
			t.Fatalf("%q: net/http served it, lean refused it: %d %s", data, lean.Status, d)
		case lean.refusal():
			leanRefusal(t, lean)
		}
	})
}

// firstLineOf returns the request line of data as net/http's server reads
// it (textproto.Reader.ReadLine: without its LF and a CR before it), when
// data has a whole one short enough for any reader's buffer.
func firstLineOf(data []byte) (string, bool) {
	i := bytes.IndexByte(data, '\n')
	if i < 0 || i > 1024 {
		return "", false
	}
	return strings.TrimSuffix(string(data[:i]), "\r"), true
}

// stdRefusesLine reports whether net/http's server refuses a request
// line before it reads the fields: the checks of http.readRequest, in its
// order, through the functions it calls.
func stdRefusesLine(line string) bool {
	method, rest, ok1 := strings.Cut(line, " ")
	target, proto, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 || !httpguts.ValidHeaderFieldName(method) {
		return true
	}
	if _, _, ok := http.ParseHTTPVersion(proto); !ok {
		return true
	}
	if method == http.MethodConnect && !strings.HasPrefix(target, "/") {
		target = "http://" + target
	}
	_, err := url.ParseRequestURI(target)
	return err != nil
}

// firstAnswer writes data to the server at addr, closes the connection
// for writing, and reads the first final answer (a zero reply when the
// connection ends first).
func firstAnswer(t *testing.T, addr string, data []byte) reply {
	conn := dial(t, addr)
	defer conn.Close()
	_, _ = conn.Write(data) // the server may refuse and close before the end
	_ = conn.CloseWrite()
	method := http.MethodGet
	if bytes.HasPrefix(data, []byte("HEAD ")) {
		method = http.MethodHead
	}
	x := readAnswers(bufio.NewReader(conn), 1, method, false)
	for _, a := range x.Answers {
		if a.Status >= 200 {
			return a
		}
	}
	return reply{}
}

// FuzzCheckTarget holds checkTarget, which refuses the target of a
// request line before its fields come, to net/http's server: it refuses
// what url.ParseRequestURI refuses, a CONNECT's authority read as
// "http://" and it.
func FuzzCheckTarget(f *testing.F) {
	for _, target := range []string{"/", "/v2/catalog?a=%zz", "/a%zz", "/a%2", "/a%2F%c3%A9", "/a\x01b", "/a?\x7f", "/a#b%", "*",
		"p:", "http://[::1/", "http://gw/v2%", "v2/catalog", "", "//gw/x", "/:a", "/?%"} {
		f.Add(http.MethodGet, target)
	}
	f.Add(http.MethodConnect, "[::1")
	f.Add(http.MethodConnect, "gw:443")
	f.Add(http.MethodConnect, "/rpc")
	f.Fuzz(func(t *testing.T, method, target string) {
		if strings.IndexByte(target, ' ') >= 0 || strings.IndexByte(method, ' ') >= 0 {
			return // a request line's spaces end its method and target
		}
		std := target
		if method == http.MethodConnect && !strings.HasPrefix(target, "/") {
			std = "http://" + target
		}
		_, err := url.ParseRequestURI(std)
		if got := checkTarget([]byte(method), []byte(target)); (got == nil) != (err == nil) {
			t.Fatalf("%s %q: checkTarget says %v, url.ParseRequestURI %v", method, target, got, err)
		}
	})
}
