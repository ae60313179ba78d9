package lean

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// outcome is what a caller of a transport sees of one call.
type outcome struct {
	Err           bool // RoundTrip failed
	Status        int
	Header        http.Header
	ContentLength int64
	Body          string
	BodyErr       bool // reading the body failed after Body
	Trailer       http.Header
}

// FuzzLeanFraming serves the fuzzer's bytes as a broker's raw answer (then
// closes the connection) and checks that the lean transport reads the
// same answer from them as http.Transport: status, header, body and
// trailer, or an error at the same point.
func FuzzLeanFraming(f *testing.F) {
	for _, seed := range []string{
		okAnswer,
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\n\r\nclose-delimited",
		"HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nabcdef",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 101 Switching Protocols\r\nConnection: upgrade\r\nUpgrade: x\r\n\r\nrest",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
		"",
	} {
		f.Add([]byte(seed), false)
	}
	f.Add([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"), true)

	var mu sync.Mutex
	var answer []byte
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			a := answer
			mu.Unlock()
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				if readRequest(bufio.NewReader(c)) {
					_, _ = c.Write(a)
				}
			}()
		}
	}()
	url := "http://" + ln.Addr().String() + "/v2/catalog"
	f.Fuzz(func(t *testing.T, data []byte, head bool) {
		mu.Lock()
		answer = data
		mu.Unlock()
		method := "GET"
		if head {
			method = "HEAD"
		}
		std := &http.Transport{DisableCompression: true}
		defer std.CloseIdleConnections()
		ln := &Transport{}
		defer ln.CloseIdleConnections()
		want, got := outcomeOf(t, std, method, url), outcomeOf(t, ln, method, url)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("answer %q to %s: lean differs from http.Transport (-standard +lean):\n%s", data, method, diff)
		}
	})
}

func outcomeOf(t *testing.T, tr http.RoundTripper, method, url string) outcome {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		return outcome{Err: true}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return outcome{Status: res.StatusCode, Header: res.Header, ContentLength: res.ContentLength,
		Body: string(b), BodyErr: err != nil, Trailer: res.Trailer}
}
