package lean

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// This file holds the harness of the differential tests of Server
// (server_test.go, server_fuzz_test.go): a lean.Server and an http.Server
// with the same handler on loopback, raw requests written to both over
// TCP, and their answers read back for comparison.

// description is what describe answers: what the handler saw of the
// request, in a canonical JSON form (Header's keys are sorted by
// encoding/json), so that two servers' answers are byte-equal when their
// handlers saw the same request.
type description struct {
	Method           string
	RequestURI       string
	Path             string
	RawPath          string
	RawQuery         string
	Proto            string
	Host             string
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Body             string // quoted: exact bytes, whatever they are
	BodyErr          string
}

// describedBy marks an answer that describe wrote (the handler ran).
const describedBy = "X-Described"

// describe answers a description of the request, its body read to the end.
func describe(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	d := description{
		Method: r.Method, RequestURI: r.RequestURI, Path: r.URL.Path, RawPath: r.URL.RawPath,
		RawQuery: r.URL.RawQuery, Proto: r.Proto, Host: r.Host, Header: r.Header,
		ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding, Close: r.Close,
		Body: strconv.Quote(string(body)),
	}
	if err != nil {
		d.BodyErr = err.Error()
	}
	b, err := json.Marshal(d)
	if err != nil {
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set(describedBy, "1")
	_, _ = w.Write(b)
}

// testHandler answers /x/... paths with the behaviours the conformance
// table needs and every other path with describe.
func testHandler(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/x/204":
		w.WriteHeader(http.StatusNoContent)
	case "/x/304":
		w.Header().Set("Etag", `"v1"`)
		w.WriteHeader(http.StatusNotModified)
	case "/x/304cl":
		w.Header().Set("Content-Length", "10")
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusNotModified)
	case "/x/204cl":
		w.Header().Set("Content-Length", "10")
		w.WriteHeader(http.StatusNoContent)
	case "/x/small": // no Content-Length, under chunkAfter
		_, _ = w.Write(bytes.Repeat([]byte("s"), 100))
	case "/x/large": // no Content-Length, over chunkAfter
		for range 3 {
			_, _ = w.Write(bytes.Repeat([]byte("L"), 1000))
		}
	case "/x/short": // says 10 bytes, writes 5
		w.Header().Set("Content-Length", "10")
		_, _ = io.WriteString(w, "short")
	case "/x/long": // says 3 bytes, writes 2 then 4
		w.Header().Set("Content-Length", "3")
		_, _ = io.WriteString(w, "ab")
		if _, err := io.WriteString(w, "cdef"); !errors.Is(err, http.ErrContentLength) {
			panic(fmt.Sprintf("writing past Content-Length: got %v, want http.ErrContentLength", err))
		}
	case "/x/close":
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "bye")
	case "/x/flush":
		_, _ = io.WriteString(w, "a")
		w.(http.Flusher).Flush()
		_, _ = io.WriteString(w, "b")
	case "/x/sniff":
		_, _ = io.WriteString(w, "<html><body>hi</body></html>")
	case "/x/103":
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Header().Del("Link")
		_, _ = io.WriteString(w, "ok")
	case "/x/noread": // leaves the body unread
		_, _ = io.WriteString(w, "ok")
	default:
		describe(w, r)
	}
}

// servers is a lean.Server and an http.Server on loopback.
type servers struct {
	std, lean string // addresses
	stdLog    *osbtest.Buffer
	leanLog   *osbtest.Buffer
	std_      *http.Server
	lean_     *Server
}

// startServers serves h with both servers (MaxHeaderBytes 8 KiB in both,
// so that the limit is cheap to pass); tune may set more. They are shut
// down at the test's end.
func startServers(tb testing.TB, h http.Handler, tune func(*http.Server, *Server)) *servers {
	tb.Helper()
	s := &servers{stdLog: &osbtest.Buffer{}, leanLog: &osbtest.Buffer{}}
	// OPTIONS * goes to the handler in both (net/http answers it itself
	// unless DisableGeneralOptionsHandler; lean always passes it on).
	s.std_ = &http.Server{Handler: h, MaxHeaderBytes: 8 << 10, ErrorLog: log.New(s.stdLog, "", 0),
		DisableGeneralOptionsHandler: true}
	s.lean_ = &Server{Handler: h, MaxHeaderBytes: 8 << 10, ErrorLog: log.New(s.leanLog, "", 0)}
	if tune != nil {
		tune(s.std_, s.lean_)
	}
	stdLn, leanLn := listen(tb), listen(tb)
	s.std, s.lean = stdLn.Addr().String(), leanLn.Addr().String()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = s.std_.Serve(stdLn) }()
	go func() { defer wg.Done(); _ = s.lean_.Serve(leanLn) }()
	tb.Cleanup(func() {
		_ = s.std_.Close()
		_ = s.lean_.Close()
		wg.Wait()
	})
	return s
}

func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	return ln
}

// dial connects to addr, with a deadline for the whole exchange.
func dial(tb testing.TB, addr string) *net.TCPConn {
	tb.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c.(*net.TCPConn)
}

// reply is what a client reads of one answer.
type reply struct {
	Status  int
	Proto   string
	Header  http.Header // without Date, nor Connection: close on HTTP/1.1 (http.ReadResponse drops it)
	Close   bool        // the answer closes the connection
	Body    string
	BodyErr bool // the body ended early (the connection closed in it)
}

// refusal reports whether a is the server's refusal rather than the
// handler's answer (the handlers never answer 4xx or 5xx).
func (a reply) refusal() bool { return a.Status >= 400 }

// exchange is what a client reads of a connection: the answers, and
// whether the connection ended (a read failed) after them.
type exchange struct {
	Answers []reply
	Ended   bool
}

// readAnswers reads answers from br until finals final (non-1xx) ones
// have come (with finals 0: one answer, 1xx or final), the connection
// ends, or an answer says it closes it (then, with waitEnd, it reads on
// until the connection ends).
func readAnswers(br *bufio.Reader, finals int, method string, waitEnd bool) exchange {
	one := finals == 0
	if one {
		finals = 1
	}
	var x exchange
	for finals > 0 {
		res, err := http.ReadResponse(br, &http.Request{Method: method})
		if err != nil {
			x.Ended = true
			return x
		}
		body, err := io.ReadAll(res.Body)
		if method == http.MethodHead && res.StatusCode >= 400 && res.Close {
			// A server's refusal has a body even in answer to HEAD
			// (net/http's too); the connection's end ends it.
			body, err = io.ReadAll(br)
		}
		res.Header.Del("Date")
		x.Answers = append(x.Answers, reply{Status: res.StatusCode, Proto: res.Proto, Header: res.Header,
			Close: res.Close, Body: string(body), BodyErr: err != nil})
		if err != nil {
			x.Ended = true
			return x
		}
		if res.StatusCode >= 200 || one {
			finals--
		}
		if res.Close && res.StatusCode >= 200 {
			if !waitEnd {
				return x
			}
			_, err := br.ReadByte()
			x.Ended = err != nil
			return x
		}
	}
	return x
}

// refused reports whether the exchange ended in a refusal: an answer of
// the server's own, or no whole answer at all.
func (x exchange) refused(finals int) bool {
	n := 0
	for _, a := range x.Answers {
		if a.refusal() {
			return true
		}
		if a.Status >= 200 {
			n++
		}
	}
	return n < finals
}

// leanRefusal checks that a is an OSB error as lean's refusals are: JSON
// with a description, Connection: close; and returns the description.
func leanRefusal(t *testing.T, a reply) string {
	t.Helper()
	var e struct {
		Description *string `json:"description"`
	}
	if err := json.Unmarshal([]byte(a.Body), &e); err != nil || e.Description == nil || *e.Description == "" {
		t.Errorf("lean's refusal %d: body %q, want JSON with a description (%v)", a.Status, a.Body, err)
		return ""
	}
	if ct := a.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("lean's refusal %d: Content-Type %q, want application/json", a.Status, ct)
	}
	if !a.Close {
		t.Errorf("lean's refusal %d: the connection stays open, want Connection: close", a.Status)
	}
	return *e.Description
}

// firstLine is a request's first line, for messages.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSuffix(line, "\r")
}
