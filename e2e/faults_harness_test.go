package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	osb "sigs.k8s.io/go-open-service-broker-client/v2"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/internal/store/backend"
	"github.com/osb-gateway/osb-gateway/internal/store/storetest"
	"github.com/osb-gateway/osb-gateway/proxy"
)

// settleTimeout bounds every wait of the fault table: for the broker to
// receive a call, for the platform's call to end, and for the store's state
// to settle after an outage (the gateway's retry queue backs off to 5s).
const settleTimeout = 30 * time.Second

// Where a fault row's gateway keeps its state.
type envKind int

const (
	memoryEnv   envKind = iota // one Gateway, memory store
	redisEnv                   // one Gateway on a redis-server the row stops and starts
	replicasEnv                // two Gateways, each with its own client of one redis-server
	processEnv                 // the osb-gateway binary on a bolt file (faults_process_test.go)
)

// faultConfig is the gateway configuration of a fault row: one broker b
// behind tenant t (route /t/b). ${...} are filled by newFaultEnv.
const faultConfig = `
admin: {address: "off"}
brokers:
  - name: b
    url: ${URL}
    username: sample-user
    password: sample-s3cret
    timeout: ${TIMEOUT}
    orphan_mitigation: ${MODE}
    orphan_schedule: 10s,1m
    validation:
      responses: ${RESPONSES}
    emulate:
      sync_within: ${SYNC_WITHIN}
      async_after: ${ASYNC_AFTER}
tenants:
  - name: t
    credentials: [{username: platform-user, password: platform-pass}]
    routes: [{broker: b}]
`

// faultEnv is one fault row's world: the sample broker behind a front that
// can cut its answers short or hold a call, and one or two gateways in
// front of it, every platform-side hop tapped.
type faultEnv struct {
	clock  *osbtest.Clock // the gateways', the stores' and the broker's clock
	broker *samplebroker.Broker
	front  *brokerFront
	undos  *tap     // the broker's own answers, for the mitigation DELETEs
	refuse *refuser // makes broker calls hit a port that refuses connections
	redis  *storetest.Redis

	stores    []store.Store    // one per gateway (nil for processEnv)
	gateways  []*proxy.Gateway // nil for processEnv
	platforms []*tap           // in front of each gateway
	urls      []string
	proc      *gatewayProc // processEnv only

	mu       sync.Mutex
	inflight context.Context // the latest platform request's context

	held held // what the platform was told it holds (faults_invariants_test.go)
}

// faultOptions are the settings a fault row changes.
type faultOptions struct {
	mode      string        // orphan_mitigation; "": mitigate
	timeout   time.Duration // broker timeout; 0: 5s
	responses string        // validation.responses; "": report
	// syncWithin is emulate.sync_within; 0: off. The bound runs on the
	// fake clock, the waits between the gateway's polls on real time.
	syncWithin time.Duration
	// asyncAfter is emulate.async_after (the async shim); 0: off.
	asyncAfter time.Duration
	// limits are tenant t's rate limits, defaults applied; nil: none.
	limits *config.Limits
	// maxInFlight is listen.max_in_flight; 0: the default.
	maxInFlight int
	// brokerCap is brokers[].max_in_flight, with queue_timeout 0s (calls
	// over it are refused at once); 0: no cap. breaker is brokers[].breaker,
	// defaults applied; nil: none.
	brokerCap int
	breaker   *config.Breaker
	// fetch and gone are emulate.fetch and emulate.gone; notRetrievable
	// makes the sample broker's catalog say instances_retrievable and
	// bindings_retrievable false (samplebroker.Options.NotRetrievable).
	fetch, gone, notRetrievable bool
	// versions are the sample broker's MinVersion and VersionCode (its 412
	// to older versions); zero: it accepts every 2.x.
	versions samplebroker.Options
	// server is listen.server of the row's gateways; "": the suite's.
	server string
	// quotas are tenant t's quotas (tenants[].quotas); nil: none.
	quotas []config.Quota
	// brokerAuth, when set, changes the broker's credentials and auth
	// (faults_auth_test.go).
	brokerAuth func(t *testing.T, b *config.Broker)
}

// serverOr is o.server, else def.
func (o faultOptions) serverOr(def string) string {
	if o.server != "" {
		return o.server
	}
	return def
}

// newFaultEnv builds the world of kind k.
func newFaultEnv(t *testing.T, k envKind, o faultOptions) *faultEnv {
	t.Helper()
	clk := osbtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	f := &faultEnv{clock: clk, refuse: &refuser{addr: refusingAddr(t)}}
	f.broker = samplebroker.New(samplebroker.Options{Username: sampleUser, Password: samplePass, AsyncDelay: -1, Now: clk.Now,
		NotRetrievable: o.notRetrievable, MinVersion: o.versions.MinVersion, VersionCode: o.versions.VersionCode})
	f.undos = &tap{h: f.broker}
	f.front = &brokerFront{next: f.undos}
	bs := httptest.NewServer(f.front)
	t.Cleanup(bs.Close)
	if k == processEnv {
		f.startProcess(t, bs.URL)
		return f
	}
	replicas := 1
	switch k {
	case redisEnv:
		f.redis = storetest.StartRedis(t)
	case replicasEnv:
		f.redis, replicas = storetest.StartRedis(t), 2
	}
	cfg := faultGatewayConfig(t, bs.URL, o)
	for range replicas {
		st := f.openStore(t)
		g, err := proxy.New(cfg, proxy.Options{Logger: slog.New(slog.DiscardHandler), Now: clk.Now, Store: st, BrokerTransport: suiteTransport,
			Transport: func(rt http.RoundTripper) http.RoundTripper { return &refusing{f.refuse, rt} }})
		if err != nil {
			t.Fatalf("proxy.New: %v", err)
		}
		t.Cleanup(func() { g.Close(nil) })
		p := &tap{h: f.watch(g)}
		f.stores, f.gateways = append(f.stores, st), append(f.gateways, g)
		f.platforms, f.urls = append(f.platforms, p), append(f.urls, serveGatewayOn(t, p, o.serverOr(suiteServer)))
	}
	return f
}

func faultGatewayConfig(t *testing.T, brokerURL string, o faultOptions) *config.Config {
	t.Helper()
	vars := map[string]string{"URL": brokerURL, "TIMEOUT": "5s", "MODE": "mitigate", "RESPONSES": "report",
		"SYNC_WITHIN": o.syncWithin.String(), "ASYNC_AFTER": o.asyncAfter.String()}
	if o.mode != "" {
		vars["MODE"] = o.mode
	}
	if o.timeout != 0 {
		vars["TIMEOUT"] = o.timeout.String()
	}
	if o.responses != "" {
		vars["RESPONSES"] = o.responses
	}
	cfg, err := config.Parse([]byte(faultConfig), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	cfg.Tenants[0].Limits, cfg.Listen.MaxInFlight = o.limits, o.maxInFlight
	cfg.Tenants[0].Quotas = o.quotas
	if o.brokerCap > 0 {
		var wait time.Duration
		cfg.Brokers[0].MaxInFlight, cfg.Brokers[0].QueueTimeout = o.brokerCap, &wait
	}
	cfg.Brokers[0].Breaker = o.breaker
	cfg.Brokers[0].Emulate.Fetch, cfg.Brokers[0].Emulate.Gone = o.fetch, o.gone
	if o.brokerAuth != nil {
		o.brokerAuth(t, &cfg.Brokers[0])
	}
	return cfg
}

// watch records the context of each platform request before the gateway
// serves it, so that a row can wait for the gateway to see the platform
// hang up (see platformGone).
func (f *faultEnv) watch(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.inflight = r.Context()
		f.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// openStore opens a memory store, or a client of the row's redis-server.
func (f *faultEnv) openStore(t *testing.T) store.Store {
	t.Helper()
	c := store.Config{Backend: store.BackendMemory}
	if f.redis != nil {
		c = store.Config{Backend: store.BackendRedis, Redis: store.RedisConfig{Addrs: []string{f.redis.Addr}}}
	}
	st, err := backend.Open(c, f.clock.Now)
	if err != nil {
		t.Fatalf("backend.Open: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// client is the platform's OSB client for replica via; timeout is how long
// it waits for an answer (0: 10s).
func (f *faultEnv) client(t *testing.T, via int, timeout time.Duration) osb.Client {
	t.Helper()
	cfg := osb.DefaultClientConfiguration()
	cfg.URL = f.urls[via] + "/t/b"
	cfg.APIVersion = osb.Version2_14()
	cfg.TimeoutSeconds = 10
	if timeout > 0 {
		cfg.TimeoutSeconds = int(timeout / time.Second)
	}
	cfg.AuthConfig = &osb.AuthConfig{BasicAuthConfig: &osb.BasicAuthConfig{Username: "platform-user", Password: "platform-pass"}}
	c, err := osb.NewClient(cfg)
	if err != nil {
		t.Fatalf("osb.NewClient: %v", err)
	}
	return c
}

// saw is what the platform saw: the status on the wire and its OSB error
// description, or status 0 and the client's error when no answer came.
type saw struct {
	status int
	desc   string // a substring of the description; "" matches any
}

// send makes the platform call c for instance id through replica via.
// When during is set, the broker holds the call until during has run.
func (f *faultEnv) send(t *testing.T, c platformCall, via int, id string, timeout time.Duration, during func(*testing.T, *faultEnv)) saw {
	t.Helper()
	cl := routed{f.client(t, via, timeout), f.urls[via] + "/t/b"} // routed: for raw-socket calls (faults_halfclose_test.go)
	before := len(f.platforms[via].exchanges())
	var err error
	if during == nil {
		err = c.send(cl, id)
	} else {
		g := f.front.hold(c.endpoint)
		errc := make(chan error, 1)
		go func() { errc <- c.send(cl, id) }()
		await(t, g.entered, "the broker to receive "+c.name)
		during(t, f)
		close(g.proceed)
		err = awaitValue(t, errc, "the platform's "+c.name+" to end")
	}
	// The gateway's handler has returned (the tap records after it): what
	// it settles before answering is settled.
	waitFor(t, "the gateway to finish "+c.name, func() bool { return len(f.platforms[via].exchanges()) > before })
	if _, ok := osb.IsHTTPError(err); err != nil && !ok {
		f.held.tell(c, id, 0, "") // no answer
		return saw{0, err.Error()}
	}
	x := f.platforms[via].last(t)
	f.held.tell(c, id, x.Status, x.Body)
	var body struct{ Description string }
	_ = json.Unmarshal([]byte(x.Body), &body)
	return saw{x.Status, body.Description}
}

// locks is the store's lock table: "key kind", "+ async" for an async
// operation.
func (f *faultEnv) locks() ([]string, error) {
	var ls []store.Lock
	var err error
	if f.proc != nil {
		err = f.proc.admin("/admin/operations", &struct{ Operations *[]store.Lock }{&ls})
	} else {
		ls, err = f.stores[0].List(context.Background(), store.ListFilter{})
	}
	var out []string
	for _, l := range ls {
		s := l.Key + " " + l.Kind
		if l.Async {
			s += " async"
		}
		out = append(out, s)
	}
	return out, err
}

// orphans is the orphan queue: "kind instance[/binding] decision", the
// decision "reported" (never due by itself) or "queued" (due).
func (f *faultEnv) orphans() ([]string, error) {
	var list []store.Orphan
	var err error
	if f.proc != nil {
		var views []adminOrphan
		err = f.proc.admin("/admin/orphans", &struct{ Orphans *[]adminOrphan }{&views})
		for _, v := range views {
			list = append(list, store.Orphan{Kind: v.Kind, InstanceID: v.InstanceID, BindingID: v.BindingID, NextAttempt: v.NextAttempt})
		}
	} else {
		list, err = f.stores[0].ListOrphans(context.Background())
	}
	var out []string
	for _, o := range list {
		what := o.InstanceID
		if o.BindingID != "" {
			what += "/" + o.BindingID
		}
		decision := "queued"
		if o.NextAttempt.Year() == 9999 {
			decision = "reported"
		}
		out = append(out, o.Kind+" "+what+" "+decision)
	}
	slices.Sort(out)
	return out, err
}

// adminOrphan is what the fault table reads of GET /admin/orphans.
type adminOrphan struct {
	Kind        string    `json:"kind"`
	InstanceID  string    `json:"instance_id"`
	BindingID   string    `json:"binding_id"`
	NextAttempt time.Time `json:"next_attempt"`
}

// calls is how many requests the broker got per endpoint name, catalog
// fetches (the gateway's cache, not the fault) and zeros left out.
type calls map[string]int64

func (f *faultEnv) calls() calls {
	c := calls{}
	for name, n := range f.broker.Counts() {
		if n > 0 && name != samplebroker.EndpointCatalog {
			c[name] = n
		}
	}
	return c
}

// mitigate runs MitigateOrphans on every replica at once and returns the
// broker's statuses for the DELETEs it sent, sorted.
func (f *faultEnv) mitigate() []int {
	before := len(f.undos.exchanges())
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, g := range f.gateways {
		wg.Go(func() {
			<-start
			g.MitigateOrphans(context.Background())
		})
	}
	close(start)
	wg.Wait()
	var statuses []int
	for _, x := range f.undos.exchanges()[before:] {
		if x.Method == http.MethodDelete {
			statuses = append(statuses, x.Status)
		}
	}
	slices.Sort(statuses)
	return statuses
}

// eventually waits until get returns want, and reports the difference when
// it does not within settleTimeout.
func eventually[T any](t *testing.T, what string, want T, get func() (T, error)) {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for {
		got, err := get()
		if err == nil && cmp.Equal(want, got, cmpopts.EquateEmpty()) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("%s after %s (-want +got):\n%s(last error: %v)", what, settleTimeout, cmp.Diff(want, got), err)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFor waits until cond holds, failing the test after settleTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(settleTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", settleTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func await(t *testing.T, c <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(settleTimeout):
		t.Fatalf("waited %s for %s", settleTimeout, what)
	}
}

func awaitValue[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(settleTimeout):
		t.Fatalf("waited %s for %s", settleTimeout, what)
		panic("unreachable")
	}
}

// setUp builds the row's world and runs its steps.
func (row faultRow) setUp(t *testing.T) *faultEnv {
	t.Helper()
	f := newFaultEnv(t, row.env, row.opts)
	for i, s := range row.steps {
		f.step(t, fmt.Sprintf("step %d", i+1), s)
	}
	return f
}

// step runs s and checks what it left; the locks and orphans are awaited,
// as the gateway settles what the store refused once the store is back.
func (f *faultEnv) step(t *testing.T, name string, s faultStep) {
	t.Helper()
	f.clock.Advance(s.advance)
	if s.arm != nil {
		s.arm(t, f)
	}
	for k := range max(s.count, 1) {
		id := "i"
		if s.count > 0 {
			id = fmt.Sprintf("i%d", k)
		}
		got := f.send(t, s.call, k%len(f.platforms), id, s.timeout, s.during)
		if got.status != s.want.saw.status || !strings.Contains(got.desc, s.want.saw.desc) {
			t.Errorf("%s: %s %s: the platform saw %d %q, want %d with %q", name, s.call.name, id, got.status, got.desc, s.want.saw.status, s.want.saw.desc)
		}
	}
	if s.after != nil {
		s.after(t, f)
	}
	f.check(t, name+" ("+s.call.name+")", s.want)
}

// check compares the store and the broker's counters with want.
func (f *faultEnv) check(t *testing.T, what string, want state) {
	t.Helper()
	eventually(t, what+": locks", want.locks, f.locks)
	eventually(t, what+": orphans", want.orphans, f.orphans)
	// The table's promises, whatever the row: nothing the platform holds
	// deleted, nothing at the broker untracked.
	eventually(t, what+": promises broken", nil, f.violations)
	if want.inventory != nil {
		eventually(t, what+": inventory", want.inventory, f.inventory)
	}
	if diff := cmp.Diff(want.calls, f.calls(), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("%s: broker requests by endpoint (-want +got):\n%s", what, diff)
	}
}
