package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// brokerFront stands before the sample broker and misbehaves, once each,
// in ways Fault does not: it holds a call until the test lets it go, or
// cuts the broker's answer short after its header.
type brokerFront struct {
	next http.Handler

	mu   sync.Mutex
	once map[string]http.HandlerFunc // by samplebroker endpoint name
}

func (b *brokerFront) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ep := endpointOf(r)
	b.mu.Lock()
	h := b.once[ep]
	delete(b.once, ep)
	b.mu.Unlock()
	if h == nil {
		b.next.ServeHTTP(w, r)
		return
	}
	h(w, r)
}

// endpointOf names the endpoints the fault table calls.
func endpointOf(r *http.Request) string {
	binding := strings.Contains(r.URL.Path, "/service_bindings/")
	switch {
	case r.Method == http.MethodPut && binding:
		return samplebroker.EndpointBind
	case r.Method == http.MethodPut:
		return samplebroker.EndpointProvision
	case r.Method == http.MethodDelete && binding:
		return samplebroker.EndpointUnbind
	case r.Method == http.MethodDelete:
		return samplebroker.EndpointDeprovision
	case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/last_operation") && !binding:
		return samplebroker.EndpointInstanceLastOperation
	}
	return ""
}

func (b *brokerFront) set(ep string, h http.HandlerFunc) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.once == nil {
		b.once = map[string]http.HandlerFunc{}
	}
	b.once[ep] = h
}

// gate is a held call: entered is closed when it reaches the broker, which
// answers once proceed is closed.
type gate struct{ entered, proceed chan struct{} }

// hold makes the next call to ep wait for the test.
func (b *brokerFront) hold(ep string) *gate {
	g := &gate{entered: make(chan struct{}), proceed: make(chan struct{})}
	b.set(ep, func(w http.ResponseWriter, r *http.Request) {
		close(g.entered)
		<-g.proceed
		b.next.ServeHTTP(w, r)
	})
	return g
}

// cut makes the broker answer the next call to ep for real, but the front
// sends only its header (with status, or the broker's own when 0) and half
// its body, then closes the connection: with a Content-Length the body
// falls short of, or chunked without the last chunk.
func (b *brokerFront) cut(ep string, status int, chunked bool) {
	b.set(ep, func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		b.next.ServeHTTP(rec, r)
		code := status
		if code == 0 {
			code = rec.Code
		}
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			panic(err) // httptest.Server's connections can be hijacked
		}
		defer conn.Close()
		body := rec.Body.Bytes()
		half := body[:len(body)/2]
		fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n", code, http.StatusText(code))
		if chunked {
			fmt.Fprintf(buf, "Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(half), half)
		} else {
			fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n%s", len(body), half)
		}
		_ = buf.Flush()
	})
}

// refuser sends the next n forwarded broker calls to a port that refuses
// connections: the broker is down, as far as the gateway can tell. (The
// gateway's transport dials that port and gets ECONNREFUSED from the
// kernel; only the address in its error differs from the broker's.) The
// broker itself stays up on its own port, so the retry reaches it. The
// gateway's own catalog fetches, which pass the same transport, are let
// through: the row is about the call the platform made.
type refuser struct {
	addr string
	n    atomic.Int32
}

// refusing is a broker transport under a refuser.
type refusing struct {
	r    *refuser
	next http.RoundTripper
}

func (rt *refusing) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/v2/catalog") {
		return rt.next.RoundTrip(req)
	}
	for {
		n := rt.r.n.Load()
		if n <= 0 {
			return rt.next.RoundTrip(req)
		}
		if rt.r.n.CompareAndSwap(n, n-1) {
			break
		}
	}
	out := req.Clone(req.Context())
	out.URL.Host = rt.r.addr
	return rt.next.RoundTrip(out)
}

// refusingAddr is a loopback address whose port is bound by the test but
// not listening: the kernel refuses connections to it, and no other
// listener can take the port while the test runs.
func refusingAddr(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatalf("socket: %v", err)
	}
	syscall.CloseOnExec(fd)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatalf("bind: %v", err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatalf("getsockname: %v", err)
	}
	in4, ok := sa.(*syscall.SockaddrInet4)
	if !ok {
		t.Fatalf("getsockname: %T", sa)
	}
	return fmt.Sprintf("127.0.0.1:%d", in4.Port)
}
