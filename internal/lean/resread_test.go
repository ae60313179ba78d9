package lean

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// parsed is what a caller sees of an answer read from a bufio.Reader, and
// what the reader holds after its body.
type parsed struct {
	Err              bool
	Status           string
	StatusCode       int
	Proto            string
	ProtoMajor       int
	ProtoMinor       int
	Header           http.Header
	ContentLength    int64
	TransferEncoding []string
	Close            bool
	Uncompressed     bool
	Trailer          http.Header
	SameRequest      bool
	NoBody           bool
	Body             string
	BodyErr          error
	Rest             string
}

func parsedOf(res *http.Response, body io.Reader, req *http.Request, br *bufio.Reader) parsed {
	b, err := io.ReadAll(body)
	rest, _ := io.ReadAll(br)
	return parsed{Status: res.Status, StatusCode: res.StatusCode, Proto: res.Proto,
		ProtoMajor: res.ProtoMajor, ProtoMinor: res.ProtoMinor, Header: res.Header,
		ContentLength: res.ContentLength, TransferEncoding: res.TransferEncoding, Close: res.Close,
		Uncompressed: res.Uncompressed, Trailer: res.Trailer, SameRequest: res.Request == req,
		NoBody: res.Body == http.NoBody, Body: string(b), BodyErr: err, Rest: string(rest)}
}

// twoReads delivers data in two reads, split at split, as a connection
// may: the header need not be whole in the first.
type twoReads struct {
	data  []byte
	split int
}

func (r *twoReads) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if r.split > 0 {
		n, r.split = min(n, r.split), 0
	}
	n = copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// stdParsed reads an answer with http.ReadResponse.
func stdParsed(br *bufio.Reader, req *http.Request) parsed {
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return parsed{Err: true}
	}
	return parsedOf(res, res.Body, req, br)
}

// FuzzResponseRead feeds answers to readResponse and http.ReadResponse:
// whenever readResponse takes one, both read the same answer, the same
// body bytes and error, and leave the same bytes after it; when it does
// not, it has consumed nothing (http.ReadResponse then reads what it
// would have).
func FuzzResponseRead(f *testing.F) {
	for _, seed := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 62\r\n\r\n" +
			`{"state":"in progress","description":"creating the instance"}`,
		"HTTP/1.1 201 Created\r\ncontent-type: application/json; charset=utf-8\r\ncontent-length: 2\r\nconnection: keep-alive\r\nkeep-alive: timeout=5\r\nx-powered-by: Express\r\netag: W/\"2-vyGp6PvFo4RvsFtPoIWeCReyIC8\"\r\n\r\n{}",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: Keep-Alive, CLOSE\r\nConnection: x\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nokEXTRA",
		"HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
		"HTTP/1.1 304 Not Modified\r\nEtag: \"x\"\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\nHTTP/1.1 200 OK\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length:  2 \t\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\r\n\r\nok",
		"HTTP/1.1 200\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200  OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 099 Odd\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 999 Made Up \x00\xff\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-Space : v\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTrailer: X-Sum\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-Empty:\r\nX-Obs: caf\xe9\r\nx-MiXeD-cAsE: 1\r\nX-Dup: a\r\nx-dup: b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-" + strings.Repeat("long-", 20) + "key: v\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nX-Ctl: a\x01b\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n: no name\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\n\r\nclose-delimited",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\nrest",
		"\r\n\r\n",
		"",
	} {
		f.Add([]byte(seed), false, uint16(0))
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n"), true, uint16(0))
	f.Add([]byte("HTTP/1.1 200 OK\r\n\r\n"), true, uint16(0))
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), false, uint16(20))
	f.Fuzz(func(t *testing.T, data []byte, head bool, split uint16) {
		req, _ := http.NewRequest(http.MethodGet, "http://broker.internal/v2/catalog", nil)
		if head {
			req.Method = http.MethodHead
		}
		fast := bufio.NewReaderSize(&twoReads{data: data, split: int(split)}, 4<<10)
		std := bufio.NewReaderSize(&twoReads{data: data, split: int(split)}, 4<<10)
		if _, err := fast.Peek(1); err != nil { // as readHeader does first
			return
		}
		res, b, ok := readResponse(fast, req)
		want := stdParsed(std, req)
		var got parsed
		switch {
		case !ok:
			got = stdParsed(fast, req) // what it left is what ReadResponse reads
		case b != nil:
			if res.Body != nil {
				t.Fatalf("answer %q: a Body of its own, and a fixed one", data)
			}
			res.Body = http.NoBody // not what the caller sees: it is b
			got = parsedOf(res, &b.fixed, req, fast)
			got.NoBody = false
		default:
			got = parsedOf(res, res.Body, req, fast)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(sameError)); diff != "" {
			t.Errorf("answer %q (fast path took it: %v): differs from http.ReadResponse (-standard +fast):\n%s", data, ok, diff)
		}
	})
}

// sameError: the same error value, or one made anew with the same text
// (the chunked reader's).
func sameError(a, b error) bool {
	return a == b || a != nil && b != nil && a.Error() == b.Error()
}

// TestResponseReadTakes: the answers the fast path is for are not left to
// http.ReadResponse.
func TestResponseReadTakes(t *testing.T) {
	for _, answer := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 410 Gone\r\ncontent-type: application/json\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\n{}",
		"HTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
	} {
		br := bufio.NewReader(strings.NewReader(answer))
		_, _ = br.Peek(1)
		req, _ := http.NewRequest("GET", "http://b/", nil)
		if _, _, ok := readResponse(br, req); !ok {
			t.Errorf("%q: left to http.ReadResponse", answer)
		}
	}
}

// TestResponseReadAllocs: the fast path's allocations for a broker's
// usual answer: the Response with its body and header values, the header
// map (two), and one string for the values.
func TestResponseReadAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	const answer = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Mon, 02 Jan 2006 15:04:05 GMT\r\nContent-Length: 2\r\n\r\n{}"
	req, _ := http.NewRequest("GET", "http://b/", nil)
	sr := strings.NewReader(answer)
	br := bufio.NewReader(sr)
	allocs := testing.AllocsPerRun(100, func() {
		sr.Reset(answer)
		br.Reset(sr)
		_, _ = br.Peek(1)
		if _, _, ok := readResponse(br, req); !ok {
			t.Fatal("left to http.ReadResponse")
		}
	})
	if allocs > 4 {
		t.Errorf("%v allocations, want at most 4", allocs)
	}
}
