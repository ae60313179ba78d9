package proxy

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/lean"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// On the lean server, a broker call is ended through its request's own
// context (lean.CancelerOf) and the lean transport registers on the
// request (no context of its own): these tests hold that path to what
// TestBrokerTimeout and TestPlatformGoneCancelsTheBrokerCall hold on
// net/http's server.

// leanServe serves h with lean.Server, as listen.server: lean does, on a
// loopback port, and returns its base URL.
func leanServe(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &lean.Server{Handler: h, ReadHeaderTimeout: config.DefaultReadHeaderTimeout, ReadTimeout: config.DefaultReadTimeout,
		WriteTimeout: config.DefaultWriteTimeout, IdleTimeout: config.DefaultIdleTimeout, MaxHeaderBytes: config.DefaultMaxHeaderBytes}
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Close(); <-done })
	return "http://" + ln.Addr().String()
}

// TestBrokerTimeoutOnTheLeanServer: the broker's timeout cancels the call
// (the broker sees its request end), the platform gets the 504, and the
// platform's connection serves its next request, whose call is not
// canceled by the first one's timeout.
func TestBrokerTimeoutOnTheLeanServer(t *testing.T) {
	var calls atomic.Int32
	ended := make(chan struct{})
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			<-r.Context().Done() // hangs until the gateway gives up
			close(ended)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"state":"succeeded"}`)
	})
	g, _ := testGateway(t, twoTenantYAML, env(b1.URL, b1.URL))
	url := leanServe(t, g) + "/t1/b1/v2/service_instances/x/last_operation"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 20 * time.Second}
	defer client.CloseIdleConnections()
	var remotes []string
	get := func() (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth(t1User, t1Pass)
		req.Header.Set("X-Broker-API-Version", "2.14")
		var local string
		req = req.WithContext(withConnTrace(req.Context(), &local))
		res, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		remotes = append(remotes, local)
		return res, string(body)
	}
	res, body := get()
	if res.StatusCode != http.StatusGatewayTimeout || !strings.Contains(body, `did not answer within 300ms`) {
		t.Fatalf("status %d: %s", res.StatusCode, body)
	}
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the broker's request went on after the timeout")
	}
	res, body = get()
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "succeeded") {
		t.Fatalf("next request: status %d: %s", res.StatusCode, body)
	}
	if remotes[0] != remotes[1] {
		t.Errorf("the second request came on a new connection (%s, then %s); want the first one kept", remotes[0], remotes[1])
	}
}

// withConnTrace records the local address of the connection a request
// goes out on.
func withConnTrace(ctx context.Context, local *string) context.Context {
	return httptraceWithGotConn(ctx, func(c net.Conn) { *local = c.LocalAddr().String() })
}

// TestPlatformGoneOnTheLeanServer: a platform that hangs up (a reset)
// while the broker works ends the broker call, long before the broker's
// timeout. (A close with a FIN is a half-close: the answer is written.)
func TestPlatformGoneOnTheLeanServer(t *testing.T) {
	arrived, canceled := make(chan struct{}), make(chan struct{})
	b1 := osbtest.NewBroker(t, func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-r.Context().Done()
		close(canceled)
	})
	g, _ := testGateway(t, strings.Replace(twoTenantYAML, "timeout: 300ms", "timeout: 30s", 1), env(b1.URL, b1.URL))
	url := leanServe(t, g)
	ctx, cancel := context.WithCancel(t.Context())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/t1/b1/v2/service_instances/x/last_operation", nil)
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	errc := sendInBackgroundWith(resettingClient(t), req)
	<-arrived
	cancel()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the broker call went on after the platform went away")
	}
	if err := <-errc; err == nil {
		t.Error("the platform's canceled request got an answer")
	}
}

func httptraceWithGotConn(ctx context.Context, f func(net.Conn)) context.Context {
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { f(i.Conn) }})
}
