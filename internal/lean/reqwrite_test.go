package lean

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

// reqSpec is a request the fuzzer makes up.
type reqSpec struct {
	method, host, path, rawPath, query string
	forceQuery, close                  bool
	header                             string // "name\x01value" entries separated by \x00
	body                               []byte
	bodyKind                           byte // see build
	contentLength                      int64
}

// build makes the request of s, with a fresh body.
func (s reqSpec) build() *http.Request {
	req := &http.Request{
		Method: s.method,
		URL: &url.URL{Scheme: "http", Host: "broker.internal:8080", Path: s.path, RawPath: s.rawPath,
			RawQuery: s.query, ForceQuery: s.forceQuery},
		Host:          s.host,
		Header:        http.Header{},
		ContentLength: s.contentLength,
		Close:         s.close,
	}
	if s.header != "" {
		for e := range strings.SplitSeq(s.header, "\x00") {
			k, v, _ := strings.Cut(e, "\x01")
			req.Header[k] = append(req.Header[k], v)
		}
	}
	switch s.bodyKind % 6 {
	case 0: // nil
	case 1:
		req.Body = http.NoBody
	case 2:
		req.Body = io.NopCloser(bytes.NewReader(s.body))
	case 3: // a body from the network: the header is flushed before it
		req.Body = io.NopCloser(iotest.OneByteReader(bytes.NewReader(s.body)))
	case 4: // a body that fails after its bytes
		req.Body = io.NopCloser(io.MultiReader(bytes.NewReader(s.body), iotest.ErrReader(errors.New("platform went away"))))
	case 5: // ReverseProxy sends no User-Agent of its own
		req.Body = http.NoBody
		req.Header["User-Agent"] = []string{""}
	}
	return req.WithContext(context.Background())
}

// wireMeaning is what a broker reads of a request.
type wireMeaning struct {
	ParseErr         bool
	Method, URL      string
	Proto            string
	Host             string
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Body             string
	BodyErr          bool
}

func meaningOf(wire []byte) wireMeaning {
	req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(wire)))
	if err != nil {
		return wireMeaning{ParseErr: true}
	}
	body, err := io.ReadAll(req.Body)
	return wireMeaning{Method: req.Method, URL: req.URL.String(), Proto: req.Proto, Host: req.Host,
		Header: req.Header, ContentLength: req.ContentLength, TransferEncoding: req.TransferEncoding,
		Close: req.Close, Body: string(body), BodyErr: err != nil}
}

// FuzzRequestWrite checks that writeRequest, when it handles a request,
// sends what (*http.Request).Write sends in meaning: a broker parsing
// either reads the same method, URL, Host, header, framing and body, and
// either both fail or neither.
func FuzzRequestWrite(f *testing.F) {
	f.Add("GET", "", "/v2/service_instances/i-1/last_operation", "", "operation=op1", false, false,
		"Authorization\x01Basic dTpw\x00X-Broker-Api-Version\x012.14\x00X-Forwarded-For\x01127.0.0.1", []byte(nil), byte(5), int64(0))
	f.Add("PUT", "broker.example:443", "/v2/service_instances/i 1", "", "accepts_incomplete=true", false, false,
		"Content-Type\x01application/json\x00X-Broker-Api-Originating-Identity\x01cloudfoundry eyJ1c2VyX2lkIjoiYSJ9", []byte(`{"service_id":"s"}`), byte(2), int64(18))
	f.Add("PATCH", "", "/v2/x", "/v2/%78", "", true, true, "Connection\x01keep-alive\x00Expect\x01100-continue", []byte("abc"), byte(3), int64(3))
	f.Add("DELETE", "", "/v2/x", "", "a=b", false, true, "User-Agent\x01 curl/8\r\n \x00X-Bad Name\x01v\x00x-lower\x01v", []byte(nil), byte(1), int64(0))
	f.Add("POST", "", "/v2/x", "", "", false, false, "X-Multi\x01a\x00X-Multi\x01b\r\nInjected: 1", []byte("short"), byte(2), int64(9))
	f.Add("POST", "", "/v2/x", "", "", false, false, "", []byte("longer than said"), byte(4), int64(4))
	f.Add("", "h\x7f", "", "", "", false, false, "Host\x01other\x00Content-Length\x019\x00Transfer-Encoding\x01chunked\x00Trailer\x01X", []byte(nil), byte(0), int64(0))
	f.Add("GET", "", "/ctl\x01", "", "q=\n", false, false, "", []byte(nil), byte(0), int64(5))
	f.Fuzz(func(t *testing.T, method, host, path, rawPath, query string, forceQuery, close bool,
		header string, body []byte, bodyKind byte, contentLength int64) {
		s := reqSpec{method, host, path, rawPath, query, forceQuery, close, header, body, bodyKind, contentLength}
		var fast bytes.Buffer
		bw := bufio.NewWriter(&fast)
		handled, fastErr := writeRequest(bw, s.build())
		if !handled {
			if bw.Buffered() > 0 {
				t.Fatalf("%+v: not handled, but %q written", s, fast.Bytes())
			}
			return
		}
		_ = bw.Flush()
		var std bytes.Buffer
		stdErr := s.build().Write(&std)
		if (fastErr == nil) != (stdErr == nil) {
			t.Fatalf("%+v: writeRequest error %v, req.Write error %v\nfast: %q\nstd:  %q", s, fastErr, stdErr, fast.Bytes(), std.Bytes())
		}
		if fastErr != nil {
			if fastErr.Error() != stdErr.Error() {
				t.Errorf("%+v: writeRequest error %q, req.Write error %q", s, fastErr, stdErr)
			}
			return
		}
		if diff := cmp.Diff(meaningOf(std.Bytes()), meaningOf(fast.Bytes())); diff != "" {
			t.Errorf("%+v: a broker reads another request (-req.Write +writeRequest):\n%s\nstd:  %q\nfast: %q", s, diff, std.Bytes(), fast.Bytes())
		}
	})
}

// TestRequestWriteFallback: the requests writeRequest leaves to req.Write.
func TestRequestWriteFallback(t *testing.T) {
	base := func() *http.Request {
		return reqSpec{method: "GET", path: "/v2/catalog"}.build()
	}
	tests := []struct {
		name string
		edit func(*http.Request) *http.Request
	}{
		{"chunked body", func(r *http.Request) *http.Request {
			r.Method, r.Body, r.ContentLength = "PUT", io.NopCloser(strings.NewReader("x")), -1
			return r
		}},
		{"body of unknown length on a GET", func(r *http.Request) *http.Request {
			r.Body = io.NopCloser(strings.NewReader("x"))
			return r
		}},
		{"trailer", func(r *http.Request) *http.Request { r.Trailer = http.Header{"X": nil}; return r }},
		{"transfer encoding", func(r *http.Request) *http.Request { r.TransferEncoding = []string{"identity"}; return r }},
		{"CONNECT", func(r *http.Request) *http.Request { r.Method = "CONNECT"; return r }},
		{"opaque URL", func(r *http.Request) *http.Request { r.URL.Opaque = "//h/p"; return r }},
		{"IDN host", func(r *http.Request) *http.Request { r.Host = "bröker.example"; return r }},
		{"zone in host", func(r *http.Request) *http.Request { r.Host = "[fe80::1%25en0]:80"; return r }},
		{"non-canonical field name", func(r *http.Request) *http.Request { r.Header["x-foo"] = []string{"1"}; return r }},
		{"Close and a Connection header", func(r *http.Request) *http.Request {
			r.Close, r.Header["Connection"] = true, []string{"keep-alive"}
			return r
		}},
		{"trace of written fields", func(r *http.Request) *http.Request {
			return r.WithContext(httptrace.WithClientTrace(r.Context(), &httptrace.ClientTrace{WroteHeaders: func() {}}))
		}},
		{"control byte in the query", func(r *http.Request) *http.Request { r.URL.RawQuery = "a=\x00"; return r }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			bw := bufio.NewWriter(&buf)
			if handled, err := writeRequest(bw, tc.edit(base())); handled || bw.Buffered() > 0 {
				t.Errorf("handled %v (%v), %d bytes written; want it left to req.Write", handled, err, bw.Buffered())
			}
		})
	}
}

// TestRequestOnTheWire: what a broker reads of requests the lean
// transport sends, with and without bodies and a User-Agent.
func TestRequestOnTheWire(t *testing.T) {
	type seen struct {
		Method, URL, UserAgent, Body string
		ContentLength                int64
		TransferEncoding             []string
		HasUA                        bool
	}
	got := make(chan seen, 1)
	b := newBroker(t, func(c net.Conn, br *bufio.Reader) {
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			body, _ := io.ReadAll(req.Body)
			_, hasUA := req.Header["User-Agent"]
			got <- seen{req.Method, req.URL.String(), req.UserAgent(), string(body), req.ContentLength, req.TransferEncoding, hasUA}
			if _, err := io.WriteString(c, okAnswer); err != nil {
				return
			}
		}
	})
	tests := []struct {
		name string
		req  func(url string) *http.Request
		want seen
	}{
		{"GET, ReverseProxy's empty User-Agent", func(url string) *http.Request {
			r, _ := http.NewRequest("GET", url+"?x=1", nil)
			r.Header["User-Agent"] = []string{""}
			return r
		}, seen{Method: "GET", URL: "/v2/catalog?x=1"}},
		{"DELETE, Go's User-Agent", func(url string) *http.Request {
			r, _ := http.NewRequest("DELETE", url, nil)
			return r
		}, seen{Method: "DELETE", URL: "/v2/catalog", UserAgent: defaultUserAgent, HasUA: true}},
		{"PUT with a body in memory", func(url string) *http.Request {
			r, _ := http.NewRequest("PUT", url, strings.NewReader(`{"a":1}`))
			return r
		}, seen{Method: "PUT", URL: "/v2/catalog", UserAgent: defaultUserAgent, HasUA: true, Body: `{"a":1}`, ContentLength: 7}},
		{"PATCH with a streamed body of known length", func(url string) *http.Request {
			r, _ := http.NewRequest("PATCH", url, io.NopCloser(iotest.HalfReader(strings.NewReader("abcdef"))))
			r.ContentLength = 6
			return r
		}, seen{Method: "PATCH", URL: "/v2/catalog", UserAgent: defaultUserAgent, HasUA: true, Body: "abcdef", ContentLength: 6}},
		{"POST with a chunked body (req.Write)", func(url string) *http.Request {
			r, _ := http.NewRequest("POST", url, io.NopCloser(strings.NewReader("xyz")))
			r.ContentLength = -1
			return r
		}, seen{Method: "POST", URL: "/v2/catalog", UserAgent: defaultUserAgent, HasUA: true, Body: "xyz", ContentLength: -1, TransferEncoding: []string{"chunked"}}},
	}
	tr := &Transport{}
	for _, tc := range tests {
		res, err := tr.RoundTrip(tc.req(b.url()))
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if diff := cmp.Diff(tc.want, <-got); diff != "" {
			t.Errorf("%s: the broker read (-want +got):\n%s", tc.name, diff)
		}
	}
	if n := b.accepted.Load(); n != 1 {
		t.Errorf("%d connections, want 1", n)
	}
}
