package console

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy"
)

const testToken = "a-long-enough-admin-token"

// consoleEnv is a console over a gateway with admin.token testToken and
// the clock now, served on loopback.
type consoleEnv struct {
	url  string
	logs *osbtest.Buffer
	// read counts the request bytes the server read, over every
	// connection.
	read *atomic.Int64
}

func newConsoleEnv(t *testing.T, now func() time.Time) *consoleEnv {
	t.Helper()
	return newReplica(t, now, nil)
}

// newReplica is newConsoleEnv keeping its sessions in sessions (nil: the
// console's own): one replica of a gateway sharing them.
func newReplica(t *testing.T, now func() time.Time, sessions SessionStore) *consoleEnv {
	t.Helper()
	cfg, err := config.Parse([]byte(`
admin: {address: "off", token: "`+testToken+`"}
state: {backend: memory}
brokers: [{name: b, url: "http://127.0.0.1:1", username: u, password: p}]
tenants: [{name: t1, credentials: [{username: t1-user, password: t1-pass}], routes: [{broker: b}]}]
`), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := backend.Open(store.Config{Backend: store.BackendMemory}, time.Now)
	g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Store: st, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	e := &consoleEnv{logs: &osbtest.Buffer{}, read: &atomic.Int64{}}
	c := New(Options{View: proxy.NewView(proxy.NewSwitch(g)), Log: slog.New(slog.NewJSONHandler(e.logs, nil)),
		Sessions: sessions})
	srv := httptest.NewUnstartedServer(c)
	srv.Listener = countingListener{srv.Listener, e.read}
	srv.Start()
	t.Cleanup(srv.Close)
	e.url = srv.URL
	return e
}

// countingListener counts the bytes read from its connections into n.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.n}, nil
}

type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// read returns res's body and closes it.
func read(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// send makes one round trip (not a client's: a client follows redirects
// and refuses a Location it cannot parse before a test could see it) of a
// form to e, with cookie when not empty, and returns the answer and its
// body.
func (e *consoleEnv) send(t *testing.T, method, path, form, cookie string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(form))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return res, read(t, res)
}
