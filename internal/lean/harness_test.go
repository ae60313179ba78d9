package lean

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
)

// broker is a raw TCP server on loopback that hands every connection it
// accepts to the next of its scripts (the last one repeats), so a test
// writes exactly the bytes a faulty broker would.
type broker struct {
	ln       net.Listener
	accepted atomic.Int32
	scripts  []func(c net.Conn, br *bufio.Reader)
	wg       sync.WaitGroup
	mu       sync.Mutex
	conns    []net.Conn
}

func newBroker(t *testing.T, scripts ...func(c net.Conn, br *bufio.Reader)) *broker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &broker{ln: ln, scripts: scripts}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns = append(b.conns, c)
			b.mu.Unlock()
			n := int(b.accepted.Add(1))
			script := b.scripts[min(n, len(b.scripts))-1]
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				script(c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		b.mu.Lock()
		for _, c := range b.conns {
			c.Close()
		}
		b.mu.Unlock()
		b.wg.Wait()
	})
	return b
}

func (b *broker) url() string { return "http://" + b.ln.Addr().String() + "/v2/catalog" }

// readRequest reads one request and its body; false when the connection
// ended first.
func readRequest(br *bufio.Reader) bool {
	req, err := http.ReadRequest(br)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, req.Body)
	return true
}

// answerEach answers every request on the connection with answer.
func answerEach(answer string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		for readRequest(br) {
			if _, err := io.WriteString(c, answer); err != nil {
				return
			}
		}
	}
}

// answerOnce answers one request with answer and closes the connection.
func answerOnce(answer string) func(net.Conn, *bufio.Reader) {
	return func(c net.Conn, br *bufio.Reader) {
		if readRequest(br) {
			_, _ = io.WriteString(c, answer)
		}
	}
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// call sends method url with tr and reads the whole answer.
func call(t *testing.T, tr http.RoundTripper, method, url string) (*http.Response, string, error) {
	t.Helper()
	return callCtx(t, context.Background(), tr, method, url)
}

func callCtx(t *testing.T, ctx context.Context, tr http.RoundTripper, method, url string) (*http.Response, string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := tr.RoundTrip(req)
	if err != nil {
		return nil, "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return res, string(b), err
}
