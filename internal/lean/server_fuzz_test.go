package lean

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"
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
// net/http refused, lean refused; lean refuses more only by design.
func FuzzServerRequest(f *testing.F) {
	for _, c := range rawCases {
		f.Add([]byte(strings.Join(c.parts, "")))
	}
	s := startServers(f, http.HandlerFunc(testHandler), nil)
	f.Fuzz(func(t *testing.T, data []byte) {
		std, lean := firstAnswer(t, s.std, data), firstAnswer(t, s.lean, data)
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
