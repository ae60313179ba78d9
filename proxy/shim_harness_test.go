package proxy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osb"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/proxy/internal/core"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/rules"
)

// shimYAML is one broker b with the async shim on; ${STATE} is the state
// section, ${SECRETS} the broker's inventory.secrets, ${MAX} its newest
// API version.
const shimYAML = `
admin: {address: "off"}
state: ${STATE}
inventory:
  key_file: ${KEY_FILE}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    api_version:
      max: "${MAX}"
    timeout: 30s
    hold_after_timeout: 1m
    orphan_mitigation: mitigate
    inventory:
      secrets: ${SECRETS}
    emulate: {async_after: 5s}
    poll: {retry_after: 10s}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
${QUOTAS}`

// shimOptions are the settings of one shim test gateway.
type shimOptions struct {
	state   string      // the state section; "": memory
	secrets string      // inventory.secrets; "": encrypted
	max     string      // api_version.max; "": 2.17
	store   store.Store // nil: one in memory on the env's clock
	// transport wraps the broker transport (Options.Transport).
	transport func(http.RoundTripper) http.RoundTripper
	// broker is the sample broker (with its gate) to reuse: a second
	// gateway before the same broker; nil: a new one.
	broker *gatedBroker
	clock  *osbtest.Clock
	// quotas is the tenant's quotas line ("    quotas: [...]"); "": none.
	quotas string
}

// shimEnv is a gateway with the async shim before a sample broker whose
// calls the test holds and releases (gatedBroker), with timers the test
// fires (fakeTimers) and a clock it advances.
type shimEnv struct {
	g      *Gateway
	gw     *httptest.Server
	broker *gatedBroker
	timers *fakeTimers
	clock  *osbtest.Clock
	st     store.Store
}

func newShimEnv(t *testing.T, o shimOptions) *shimEnv {
	t.Helper()
	if o.clock == nil {
		o.clock = osbtest.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	}
	if o.broker == nil {
		sb := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Minute, Now: o.clock.Now})
		o.broker = &gatedBroker{Broker: sb, arrived: make(chan heldCall, 8)}
		bs := httptest.NewServer(o.broker)
		t.Cleanup(bs.Close)
		o.broker.url = bs.URL
	}
	if o.state == "" {
		o.state = "{backend: memory}"
	}
	if o.secrets == "" {
		o.secrets = config.SecretsEncrypted
	}
	if o.max == "" {
		o.max = "2.17"
	}
	env := map[string]string{"URL": o.broker.url, "SECRETS": o.secrets, "MAX": o.max, "KEY_FILE": keyFile(t)}
	yaml := strings.NewReplacer("${STATE}", o.state, "${QUOTAS}", o.quotas).Replace(shimYAML) // YAML sections, not values
	cfg, err := config.Parse([]byte(yaml), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	if o.store == nil {
		o.store, _ = backend.Open(store.Config{Backend: store.BackendMemory}, o.clock.Now)
	}
	timers := &fakeTimers{started: make(chan chan time.Time, 8)}
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: o.clock.Now, Store: o.store, Timer: timers.start, Transport: o.transport})
	if err != nil {
		t.Fatal(err)
	}
	gw := httptest.NewServer(g)
	t.Cleanup(gw.Close)
	return &shimEnv{g: g, gw: gw, broker: o.broker, timers: timers, clock: o.clock, st: o.store}
}

// keyFile writes a fresh inventory key file for t.
func keyFile(t *testing.T) string {
	t.Helper()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	p := filepath.Join(t.TempDir(), "inventory.keys")
	if err := os.WriteFile(p, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// gatedBroker is a sample broker that holds every call but reads whose
// path has "/held" in it until the test releases it.
type gatedBroker struct {
	*samplebroker.Broker
	url     string
	arrived chan heldCall
}

// heldCall is one call the gatedBroker holds: closing release lets the
// sample broker answer it.
type heldCall struct {
	r       *http.Request
	release chan struct{}
}

func (b *gatedBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && strings.Contains(r.URL.Path, "/held") {
		c := heldCall{r: r, release: make(chan struct{})}
		b.arrived <- c
		select {
		case <-c.release:
		case <-r.Context().Done():
			return
		}
	}
	b.Broker.ServeHTTP(w, r)
}

// held waits for the next call the broker holds.
func (e *shimEnv) held(t *testing.T) heldCall {
	t.Helper()
	select {
	case c := <-e.broker.arrived:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no call reached the broker")
		return heldCall{}
	}
}

// fakeTimers are the async shim's timers, fired by the test.
type fakeTimers struct{ started chan chan time.Time }

func (f *fakeTimers) start(time.Duration) (<-chan time.Time, func() bool) {
	c := make(chan time.Time, 1)
	f.started <- c
	return c, func() bool { return true }
}

// fire fires the next timer started (waiting for it to start).
func (e *shimEnv) fire(t *testing.T) {
	t.Helper()
	select {
	case c := <-e.timers.started:
		c <- time.Time{}
	case <-time.After(10 * time.Second):
		t.Fatal("no async_after timer started")
	}
}

// reply is a platform call's answer.
type reply struct {
	status int
	body   string
	header http.Header
}

// send sends a platform call in the background; its answer comes on the
// channel.
func (e *shimEnv) send(t *testing.T, method, path, version, body string) <-chan reply {
	t.Helper()
	out := make(chan reply, 1)
	var in io.Reader
	if body != "" {
		in = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, e.gw.URL+"/t1/b"+path, in)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", version)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			out <- reply{status: -1, body: err.Error()}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		out <- reply{status: res.StatusCode, body: string(b), header: res.Header}
	}()
	return out
}

// call sends a platform call and waits for its answer.
func (e *shimEnv) call(t *testing.T, method, path, version, body string) reply {
	t.Helper()
	return wait(t, e.send(t, method, path, version, body))
}

// wait waits for a call's answer.
func wait(t *testing.T, c <-chan reply) reply {
	t.Helper()
	select {
	case a := <-c:
		return a
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
		return reply{}
	}
}

// lock returns the lock on key, or a zero Lock when there is none.
func (e *shimEnv) lock(t *testing.T, key string) store.Lock {
	t.Helper()
	l, err := e.st.Get(context.Background(), key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return l
}

// waitShim waits until the lock on key records the outcome state of its
// emulated operation.
func (e *shimEnv) waitShim(t *testing.T, key, state string) store.Lock {
	t.Helper()
	var l store.Lock
	waitFor(t, func() bool {
		l = e.lock(t, key)
		return l.Shim.State == state
	})
	return l
}

// checkShimAnswer fails t unless an answer the gateway made in the broker's
// place passes the response rules of the platform's version.
func checkShimAnswer(t *testing.T, what string, c rules.Call, version string, a reply, polled rules.Endpoint) {
	t.Helper()
	_, vs := rules.CheckResponse(c, osb.MustParseVersion(version), a.status, []byte(a.body), nil, rules.ResponseOptions{Polled: polled})
	for _, v := range vs {
		t.Errorf("%s (%d %s) breaks the %s rules: %s: %s", what, a.status, a.body, version, v.Rule, v.Description)
	}
	if ct := a.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s: Content-Type %q", what, ct)
	}
}

// operationOf returns the operation of a 202 answer.
func operationOf(t *testing.T, a reply) string {
	t.Helper()
	read := rules.ReadResponse(rules.Call{Endpoint: rules.Provision}, a.status, []byte(a.body))
	if a.status != http.StatusAccepted || !strings.HasPrefix(read.Operation, emulate.ShimOperationPrefix) {
		t.Fatalf("want 202 with an operation of the gateway's, got %d %s", a.status, a.body)
	}
	return read.Operation
}

// timeoutTransport makes a PUT to the broker on a path with "/times-out"
// in it fail as a broker timeout does, once the test closes now.
func timeoutTransport(now <-chan struct{}) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, "/times-out") {
				return rt.RoundTrip(r)
			}
			<-now
			return nil, core.ErrBrokerTimeout
		})
	}
}

// releaser returns the func that releases c, once however often it is
// called, and calls it when t ends (a test that failed first).
func (c heldCall) releaser(t *testing.T) func() {
	var once sync.Once
	release := func() { once.Do(func() { close(c.release) }) }
	t.Cleanup(release)
	return release
}

// openStore opens the store c on clock, closed when the test ends.
func openStore(t *testing.T, c store.Config, clock *osbtest.Clock) store.Store {
	t.Helper()
	st, err := backend.Open(c, clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
