package proxy

import (
	"bufio"
	cryptotls "crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
)

// TestBrokerAddressNeverReachesThePlatform: with a broker down, the 502/503
// a platform got said `dial tcp 127.0.0.1:8182: connect: connection
// refused`: in a multi-tenant gateway every platform saw the network layout
// behind it. For a broker that refuses connections, one that resets them,
// one whose TLS certificate fails, and one that never answers, no body a
// platform gets (the catalog-unavailable 503, a refused provision, a poll,
// a deprovision) holds the broker's host:port, its IP, or a Go network
// error; the description still says what happened; and the log and the
// broker call's client span keep the detail. On both broker transports.
func TestBrokerAddressNeverReachesThePlatform(t *testing.T) {
	faults := []struct {
		name   string
		start  func(t *testing.T) (url, addr, tls string) // tls: brokers[].tls, "" for none
		says   string                                     // in every description
		detail string                                     // in the log and the client span
	}{
		{"refuses connections", refusingBroker, "could not be reached: it refused the connection", "connect: connection refused"},
		{"resets the connection", resettingBroker, "reset the connection", "connection reset by peer"},
		{"TLS certificate of an unknown authority", tlsBroker(false), "failed the TLS handshake: its certificate is signed by an unknown authority", "x509: certificate signed by unknown authority"},
		{"TLS certificate for another name", tlsBroker(true), "failed the TLS handshake: its certificate does not cover the name the gateway checks", "x509: cannot validate certificate for 127.0.0.1"},
		// The Go error differs by transport (lean: context canceled).
		{"never answers", silentBroker, "did not answer within 300ms", "did not answer within 300ms: "},
	}
	query := "?service_id=" + samplebroker.ServiceID + "&plan_id=" + samplebroker.PlanSyncID
	calls := []struct {
		name, method, path, body string
		status                   int
		timeout                  int // status when the broker never answers, 0: status
	}{
		{"catalog", "GET", "/v2/catalog", "", 503, 0},
		{"provision (catalog unavailable)", "PUT", "/v2/service_instances/i", provisionBody(samplebroker.PlanSyncID, ""), 503, 0},
		{"poll", "GET", "/v2/service_instances/i/last_operation" + query, "", 502, 504},
		{"deprovision", "DELETE", "/v2/service_instances/i" + query, "", 502, 504},
	}
	for _, kind := range []string{config.TransportStandard, config.TransportLean} {
		for _, fault := range faults {
			t.Run(kind+"/"+fault.name, func(t *testing.T) {
				t.Parallel()
				url, addr, tls := fault.start(t)
				host, port, _ := net.SplitHostPort(addr)
				logs := &osbtest.Buffer{}
				sr, tp := traced(t)
				// Only the broker that never answers waits for the timeout;
				// the others fail on their own, and a TLS handshake under
				// -race on a loaded machine may take longer than 300ms.
				timeout := "30s"
				if fault.name == "never answers" {
					timeout = "300ms"
				}
				cfg, err := config.Parse([]byte(`
admin: {address: "off"}
brokers: [{name: b, url: "`+url+`", timeout: `+timeout+tls+`}]
tenants: [{name: t, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{})
				if err != nil {
					t.Fatal(err)
				}
				g, err := New(cfg, Options{Logger: slog.New(slog.NewJSONHandler(logs, nil)), BrokerTransport: kind,
					Tracing: &Tracing{Provider: tp, Propagator: w3c}})
				if err != nil {
					t.Fatal(err)
				}
				gw := httptest.NewServer(g)
				t.Cleanup(gw.Close)
				for _, c := range calls {
					var body io.Reader
					if c.body != "" {
						body = strings.NewReader(c.body)
					}
					res, got := do(t, c.method, gw.URL+"/t/b"+c.path, t1User, t1Pass, "2.14", body)
					want := c.status
					if c.timeout != 0 && fault.name == "never answers" {
						want = c.timeout
					}
					if res.StatusCode != want {
						t.Errorf("%s: status %d, want %d: %s", c.name, res.StatusCode, want, got)
					}
					for _, leak := range []string{addr, host, ":" + port, "dial tcp", "read tcp", "write tcp"} {
						if strings.Contains(got, leak) {
							t.Errorf("%s: the platform's body holds %q: %s", c.name, leak, got)
						}
					}
					if !strings.Contains(got, fault.says) || !strings.Contains(got, `\"b\"`) {
						t.Errorf("%s: the description does not name broker \"b\" and say %q: %s", c.name, fault.says, got)
					}
				}
				// The operator's side keeps what the platform does not get.
				if l := logs.String(); !strings.Contains(l, fault.detail) {
					t.Errorf("the log lacks %q:\n%s", fault.detail, l)
				}
				var client []string
				for _, s := range byKind(endedSpans(t, sr, 2*len(calls)), trace.SpanKindClient) {
					text := ""
					for _, kv := range s.Attributes() {
						text += " " + string(kv.Key) + "=" + kv.Value.String()
					}
					for _, e := range s.Events() {
						for _, kv := range e.Attributes {
							text += " " + string(kv.Key) + "=" + kv.Value.String()
						}
					}
					client = append(client, text)
				}
				joined := strings.Join(client, "\n")
				if !strings.Contains(joined, "server.address="+host) || !strings.Contains(joined, "server.port="+port) {
					t.Errorf("no client span names the broker's address %s:\n%s", addr, joined)
				}
				if fault.name != "never answers" && !strings.Contains(joined, fault.detail) {
					t.Errorf("no client span records %q:\n%s", fault.detail, joined)
				}
			})
		}
	}
}

// refusingBroker is a loopback address whose port is bound but not
// listening: the kernel refuses connections to it, and no other listener
// can take the port while the test runs.
func refusingBroker(t *testing.T) (url, addr, tls string) {
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
	addr = fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	return "http://" + addr, addr, ""
}

// resettingBroker reads each request whole, then resets the connection
// (SO_LINGER 0) instead of answering.
func resettingBroker(t *testing.T) (url, addr, tls string) {
	t.Helper()
	url, addr = serveRaw(t, func(c *net.TCPConn, r *http.Request) {
		_ = c.SetLinger(0)
	})
	return url, addr, ""
}

// silentBroker reads each request and never answers: the connection stays
// open until the gateway gives up on it.
func silentBroker(t *testing.T) (url, addr, tls string) {
	t.Helper()
	url, addr = serveRaw(t, func(c *net.TCPConn, r *http.Request) {
		_, _ = c.Read(make([]byte, 1)) // until the gateway hangs up
	})
	return url, addr, ""
}

// serveRaw is a broker on loopback that reads each request (body too),
// hands the connection to answer, then closes it.
func serveRaw(t *testing.T, answer func(c *net.TCPConn, r *http.Request)) (url, addr string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(time.Minute))
				r, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, r.Body)
				answer(c.(*net.TCPConn), r)
			})
		}
	})
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	return "http://" + ln.Addr().String(), ln.Addr().String()
}

// tlsBroker is the sample broker on TLS. With otherName, its certificate
// is for broker.internal only, signed by a CA the gateway trusts
// (brokers[].tls.ca_file): the name the gateway checks is the URL's IP,
// which the certificate does not cover. Without, it covers the IP, signed
// by a CA the gateway does not trust.
func tlsBroker(otherName bool) func(t *testing.T) (url, addr, tls string) {
	return func(t *testing.T) (url, addr, tls string) {
		t.Helper()
		ca := osbtest.NewCA("broker CA")
		spec := osbtest.CertSpec{DNS: []string{"broker.internal"}}
		if !otherName {
			spec.IPs = []net.IP{net.IPv4(127, 0, 0, 1)}
		}
		srv := httptest.NewUnstartedServer(samplebroker.New(samplebroker.Options{}))
		srv.TLS = &cryptotls.Config{Certificates: []cryptotls.Certificate{ca.Issue(spec).TLS}}
		srv.Config.ErrorLog = slog.NewLogLogger(slog.DiscardHandler, slog.LevelError)
		srv.StartTLS()
		t.Cleanup(srv.Close)
		if otherName {
			tls = ", tls: {ca_file: " + osbtest.WriteFile(t, t.TempDir(), "ca.pem", ca.PEM) + "}"
		}
		return srv.URL, srv.Listener.Addr().String(), tls
	}
}
