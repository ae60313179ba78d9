package proxy

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/osb-gateway/osb-gateway/internal/audit"
	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/internal/samplebroker"
	"github.com/osb-gateway/osb-gateway/internal/store"
	"github.com/osb-gateway/osb-gateway/proxy/internal/emulate"
	"github.com/osb-gateway/osb-gateway/rules"
)

// shieldYAML puts the sample broker, behind pollBroker, before tenant t1.
const shieldYAML = `
admin: {address: "off"}
brokers:
  - name: b
    url: ${URL}
    username: sample
    password: sample-secret
    timeout: 5s
    validation:
      responses: ${RESPONSES}
    poll:
      retry_after: ${RETRY_AFTER}
      min_interval: ${MIN_INTERVAL}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: t1-pass}]
    routes: [{broker: b}]
`

// pollBroker is the sample broker with its last_operation answers taken
// over: each is counted, may wait for a gate, and is the answer the test
// set, with the request identity echoed.
type pollBroker struct {
	sample  http.Handler
	calls   atomic.Int64  // last_operation calls that reached the broker
	arrived chan struct{} // a value per call (buffered; dropped when full)

	mu     sync.Mutex
	status int
	body   string
	header http.Header
	gate   chan struct{} // when not nil, calls wait for it to close
	cut    bool          // the body is cut short: the connection closes mid-body
}

func (b *pollBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/last_operation") {
		b.sample.ServeHTTP(w, r)
		return
	}
	b.calls.Add(1)
	b.mu.Lock()
	gate, status, body, header, cut := b.gate, b.status, b.body, b.header, b.cut
	b.mu.Unlock()
	select {
	case b.arrived <- struct{}{}:
	default:
	}
	if gate != nil {
		<-gate
	}
	maps.Copy(w.Header(), header)
	if id := r.Header.Get("X-Broker-API-Request-Identity"); id != "" {
		w.Header().Set("X-Broker-API-Request-Identity", id)
	}
	if cut {
		w.Header().Set("Content-Length", "1000")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
	if cut {
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

// answer sets what last_operation calls get; retryAfter "" sends none.
func (b *pollBroker) answer(status int, body, retryAfter string) {
	h := http.Header{"Content-Type": {"application/json"}}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status, b.body, b.header = status, body, h
}

// hold makes the next calls wait until the returned func is called (at
// the latest when the test ends, so a failed test does not hang).
func (b *pollBroker) hold(t *testing.T) (release func()) {
	gate := make(chan struct{})
	b.mu.Lock()
	b.gate = gate
	b.mu.Unlock()
	var once sync.Once
	release = func() {
		once.Do(func() {
			b.mu.Lock()
			b.gate = nil
			b.mu.Unlock()
			close(gate)
		})
	}
	t.Cleanup(release)
	return release
}

type shieldEnv struct {
	gw      *httptest.Server
	direct  string // the broker's URL
	g       *Gateway
	broker  *pollBroker
	clock   *osbtest.Clock
	metrics *Metrics
	joined  chan struct{} // a value per shielded poll that waits for a broker call
	records chan audit.Record
	lines   chan string // access lines
}

// chanWriter sends each write (an access line) to a channel.
type chanWriter chan string

func (c chanWriter) Write(p []byte) (int, error) { c <- string(p); return len(p), nil }

// chanAudit sends each audit record to a channel.
type chanAudit chan audit.Record

func (c chanAudit) Write(r *audit.Record) error { c <- *r; return nil }

// shieldSettings are the broker settings of shieldYAML.
type shieldSettings struct{ responses, retryAfter, minInterval string }

func newShieldEnv(t *testing.T, set shieldSettings) *shieldEnv {
	t.Helper()
	clock := osbtest.NewClock(time.Date(2026, 1, 9, 10, 0, 0, 0, time.UTC))
	sample := samplebroker.New(samplebroker.Options{Username: "sample", Password: "sample-secret", AsyncDelay: time.Hour, Now: clock.Now})
	b := &pollBroker{sample: sample, arrived: make(chan struct{}, 64)}
	b.answer(200, `{"state":"in progress"}`, "10")
	bs := httptest.NewServer(b)
	t.Cleanup(bs.Close)
	env := map[string]string{"URL": bs.URL, "RESPONSES": "report", "RETRY_AFTER": "0s", "MIN_INTERVAL": "0s"}
	for k, v := range map[string]string{"RESPONSES": set.responses, "RETRY_AFTER": set.retryAfter, "MIN_INTERVAL": set.minInterval} {
		if v != "" {
			env[k] = v
		}
	}
	cfg, err := config.Parse([]byte(shieldYAML), config.Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	m, err := registeredMetrics(clock.Now)
	if err != nil {
		t.Fatal(err)
	}
	records, lines := make(chan audit.Record, 64), make(chan string, 64)
	g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Metrics: m,
		AccessLog: NewAccessLog(chanWriter(lines), "json", nil), Audit: &AuditOptions{Writer: chanAudit(records)}})
	if err != nil {
		t.Fatal(err)
	}
	e := &shieldEnv{direct: bs.URL, g: g, broker: b, clock: clock, metrics: m, joined: make(chan struct{}, 64),
		records: records, lines: lines}
	g.upstreams["b"].Proxy.Transport.(*emulate.PollShield).Joined = func() { e.joined <- struct{}{} }
	e.gw = httptest.NewServer(g) // after the hook is set: its goroutines see it
	t.Cleanup(e.gw.Close)
	return e
}

// said returns the audit record and the access line of the next call
// served, failing the test after a generous deadline.
func (e *shieldEnv) said(t *testing.T) (audit.Record, string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	var rec audit.Record
	select {
	case rec = <-e.records:
	case <-deadline:
		t.Fatal("no audit record within 10s")
	}
	select {
	case line := <-e.lines:
		return rec, line
	case <-deadline:
		t.Fatal("no access line within 10s")
	}
	return rec, ""
}

// provision starts an async provision of id through the gateway and
// returns its operation.
func (e *shieldEnv) provision(t *testing.T, id string) string {
	t.Helper()
	res, body := do(t, "PUT", e.gw.URL+"/t1/b/v2/service_instances/"+id+"?accepts_incomplete=true", t1User, t1Pass, "2.15",
		strings.NewReader(provisionBody(samplebroker.PlanAsyncID, "")))
	if res.StatusCode != 202 {
		t.Fatalf("provision %s: %d %s", id, res.StatusCode, body)
	}
	var out struct{ Operation string }
	if err := json.Unmarshal([]byte(body), &out); err != nil || out.Operation == "" {
		t.Fatalf("provision %s: no operation in %s (%v)", id, body, err)
	}
	return out.Operation
}

// polled is one poll's answer as the platform got it.
type polled struct {
	status int
	header http.Header
	body   string
	err    error
}

// poll sends GET last_operation of instance id with request identity rid
// through the gateway; path, when set, replaces the instance's.
func (e *shieldEnv) poll(ctx context.Context, path, rid string) polled {
	req, err := http.NewRequestWithContext(ctx, "GET", e.gw.URL+"/t1/b"+path, nil)
	if err != nil {
		return polled{err: err}
	}
	req.SetBasicAuth(t1User, t1Pass)
	req.Header.Set("X-Broker-API-Version", "2.15")
	req.Header.Set("X-Broker-API-Request-Identity", rid)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return polled{err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return polled{status: res.StatusCode, header: res.Header, body: string(b), err: err}
}

func lastOpPath(id, op string) string {
	return "/v2/service_instances/" + id + "/last_operation?operation=" + op
}

// waitN receives n values from ch, failing the test after a generous
// deadline.
func waitN(t *testing.T, ch <-chan struct{}, n int, what string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for i := range n {
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: %d of %d within 10s", what, i, n)
		}
	}
}

// pollCount returns osb_gateway_polls_total of broker b for answer.
func (e *shieldEnv) pollCount(answer string) float64 {
	return seriesValue(e.metrics, "osb_gateway_polls_total", map[string]string{"broker": "b", "answer": answer})
}

// TestPollShieldSharesOneBrokerCall: polls of one operation in flight
// together cost the broker one call; each platform gets the same status,
// Retry-After and body, and its own request identity.
func TestPollShieldSharesOneBrokerCall(t *testing.T) {
	for _, state := range []string{"in progress", "succeeded"} {
		t.Run(state, func(t *testing.T) {
			e := newShieldEnv(t, shieldSettings{})
			op := e.provision(t, "i1")
			e.broker.answer(200, `{"state":"`+state+`","description":"step 3 of 5"}`, "10")
			release := e.broker.hold(t)
			const n = 6
			results := make([]polled, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { results[i] = e.poll(t.Context(), lastOpPath("i1", op), "rid-"+string(rune('a'+i))) })
			}
			waitN(t, e.joined, n, "polls waiting for the broker call")
			release()
			wg.Wait()
			if got := e.broker.calls.Load(); got != 1 {
				t.Errorf("%d polls in flight together made %d broker calls, want 1", n, got)
			}
			for i, r := range results {
				if r.err != nil || r.status != 200 || r.body != `{"state":"`+state+`","description":"step 3 of 5"}` ||
					r.header.Get("Retry-After") != "10" {
					t.Errorf("poll %d: %d %q Retry-After %q %v", i, r.status, r.body, r.header.Get("Retry-After"), r.err)
				}
				if got, want := r.header.Get("X-Broker-API-Request-Identity"), "rid-"+string(rune('a'+i)); got != want {
					t.Errorf("poll %d got request identity %q, want its own %q", i, got, want)
				}
			}
			if f, s := e.pollCount(emulate.ShieldForwarded), e.pollCount(emulate.ShieldShared); f != 1 || s != n-1 {
				t.Errorf("osb_gateway_polls_total: forwarded %v, shared %v; want 1 and %d", f, s, n-1)
			}
			// A terminal answer released the lock, for all of them; an
			// operation in progress keeps it.
			_, err := e.g.guard.St.Get(t.Context(), store.LockKey("b", "i1"))
			if locked := err == nil; locked != (state == "in progress") {
				t.Errorf("after the shared %q answer the instance is locked: %v (%v)", state, locked, err)
			}
		})
	}
}

// TestPollShieldCallOutlivesItsPoll: the poll whose request made the
// shared call goes away; the call goes on and answers the others.
func TestPollShieldCallOutlivesItsPoll(t *testing.T) {
	e := newShieldEnv(t, shieldSettings{})
	op := e.provision(t, "i1")
	release := e.broker.hold(t)
	ctx, cancel := context.WithCancel(t.Context())
	first := make(chan polled, 1)
	go func() { first <- e.poll(ctx, lastOpPath("i1", op), "rid-first") }()
	waitN(t, e.broker.arrived, 1, "the first poll's broker call")
	second := make(chan polled, 1)
	go func() { second <- e.poll(t.Context(), lastOpPath("i1", op), "rid-second") }()
	waitN(t, e.joined, 2, "polls waiting for the broker call")
	cancel()
	if r := <-first; r.err == nil {
		t.Errorf("the first poll was answered after it went away: %d", r.status)
	}
	release()
	r := <-second
	if r.err != nil || r.status != 200 || r.body != `{"state":"in progress"}` || r.header.Get("X-Broker-API-Request-Identity") != "rid-second" {
		t.Errorf("second poll: %d %q %v %v", r.status, r.body, r.header, r.err)
	}
	if got := e.broker.calls.Load(); got != 1 {
		t.Errorf("%d broker calls, want 1", got)
	}
}

// TestPollShieldReusesInProgress: an "in progress" answer answers the
// operation's polls for poll.min_interval (by default the answer's
// Retry-After, at most a minute), read on the injected clock; the next
// poll after reaches the broker.
func TestPollShieldReusesInProgress(t *testing.T) {
	date := func(d time.Duration) string {
		return time.Date(2026, 1, 9, 10, 0, 0, 0, time.UTC).Add(d).Format(http.TimeFormat)
	}
	for _, tt := range []struct {
		name, retryAfter, minInterval string
		reusedFor                     time.Duration // 0: never reused
	}{
		{name: "the broker's Retry-After", retryAfter: "10", reusedFor: 10 * time.Second},
		{name: "an HTTP-date", retryAfter: date(20 * time.Second), reusedFor: 20 * time.Second},
		{name: "a Retry-After over a minute", retryAfter: "600", reusedFor: time.Minute},
		{name: "min_interval over Retry-After", retryAfter: "10", minInterval: "3s", reusedFor: 3 * time.Second},
		{name: "min_interval without Retry-After", minInterval: "90s", reusedFor: 90 * time.Second},
		{name: "negative min_interval", retryAfter: "10", minInterval: "-1s"},
		{name: "no Retry-After", retryAfter: ""},
		{name: "a malformed Retry-After", retryAfter: "soon"},
		{name: "Retry-After 0", retryAfter: "0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newShieldEnv(t, shieldSettings{minInterval: tt.minInterval})
			op := e.provision(t, "i1")
			e.broker.answer(200, `{"state":"in progress"}`, tt.retryAfter)
			path := lastOpPath("i1", op)
			check := func(step string, wantCalls int64) {
				t.Helper()
				if r := e.poll(t.Context(), path, "rid-"+step); r.status != 200 || r.body != `{"state":"in progress"}` {
					t.Fatalf("%s: %d %q %v", step, r.status, r.body, r.err)
				}
				if got := e.broker.calls.Load(); got != wantCalls {
					t.Errorf("%s: %d broker calls, want %d", step, got, wantCalls)
				}
			}
			check("first poll", 1)
			if tt.reusedFor == 0 {
				check("second poll, same time", 2)
				return
			}
			e.clock.Advance(tt.reusedFor - time.Millisecond)
			check("just before the interval ends", 1)
			if got := e.pollCount(emulate.ShieldReused); got != 1 {
				t.Errorf("osb_gateway_polls_total{answer=reused} %v, want 1", got)
			}
			e.clock.Advance(time.Millisecond)
			check("once it ended", 2)
		})
	}
}

// TestPollShieldSaysSo: a poll answered from the shield says so in its
// audit record and access line; one that made the broker call does not.
func TestPollShieldSaysSo(t *testing.T) {
	e := newShieldEnv(t, shieldSettings{})
	op := e.provision(t, "i1")
	e.said(t)
	for i, want := range []string{"", emulate.ShieldReused} {
		if r := e.poll(t.Context(), lastOpPath("i1", op), "rid"); r.status != 200 {
			t.Fatalf("poll %d: %d %s", i, r.status, r.body)
		}
		rec, line := e.said(t)
		if rec.PollShield != want || rec.Outcome != OutcomeForwarded || rec.Endpoint != "instance_last_operation" {
			t.Errorf("poll %d: audit record poll_shield %q, outcome %q, endpoint %q; want %q, forwarded",
				i, rec.PollShield, rec.Outcome, rec.Endpoint, want)
		}
		if has := strings.Contains(line, `"poll_shield":"reused"`); has != (want != "") {
			t.Errorf("poll %d: access line %s", i, line)
		}
	}
}

// TestPollShieldCutShort: an answer whose body ends early reaches every
// poll that shared it as the 502 a poll of its own would get, and is not
// kept.
func TestPollShieldCutShort(t *testing.T) {
	e := newShieldEnv(t, shieldSettings{})
	op := e.provision(t, "i1")
	e.broker.mu.Lock()
	e.broker.cut = true
	e.broker.mu.Unlock()
	release := e.broker.hold(t)
	results := make(chan polled, 2)
	for _, rid := range []string{"rid-a", "rid-b"} {
		go func() { results <- e.poll(t.Context(), lastOpPath("i1", op), rid) }()
	}
	waitN(t, e.joined, 2, "polls waiting for the broker call")
	release()
	for range 2 {
		if r := <-results; r.status != 502 || !strings.Contains(r.body, "cut short") {
			t.Errorf("poll of an answer cut short: %d %s %v", r.status, r.body, r.err)
		}
	}
	e.poll(t.Context(), lastOpPath("i1", op), "rid-c")
	if got := e.broker.calls.Load(); got != 2 {
		t.Errorf("%d broker calls, want 2 (one shared, then one more: nothing kept)", got)
	}
}

// TestPollShieldTerminalNotReused: a terminal answer serves no later
// poll, and an answer about one operation never serves the polls of
// another on the same instance.
func TestPollShieldTerminalNotReused(t *testing.T) {
	e := newShieldEnv(t, shieldSettings{minInterval: "1m"})
	op := e.provision(t, "i1")
	path := lastOpPath("i1", op)
	e.broker.answer(200, `{"state":"failed","description":"no capacity"}`, "10")
	for i, want := range []int64{1, 2} { // the second: the lock is gone, the poll is forwarded
		if r := e.poll(t.Context(), path, "rid"); r.status != 200 || !strings.Contains(r.body, "failed") {
			t.Fatalf("poll %d: %d %q", i, r.status, r.body)
		}
		if got := e.broker.calls.Load(); got != want {
			t.Errorf("poll %d: %d broker calls, want %d", i, got, want)
		}
	}
	// An "in progress" answer is kept for a minute; the operation's lock
	// is then released (its polls are forwarded), and another operation
	// takes the instance with the same operation string: its first poll
	// is its own.
	op = e.provision(t, "i2")
	path = lastOpPath("i2", op)
	e.broker.answer(200, `{"state":"in progress"}`, "")
	e.poll(t.Context(), path, "rid")
	l, err := e.g.guard.St.Get(t.Context(), store.LockKey("b", "i2"))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.g.guard.St.Release(t.Context(), l.Key, l.Owner); err != nil {
		t.Fatal(err)
	}
	step := func(what string) {
		t.Helper()
		before := e.broker.calls.Load()
		if r := e.poll(t.Context(), path, "rid"); r.status != 200 {
			t.Fatalf("%s: %d %q", what, r.status, r.body)
		}
		if got := e.broker.calls.Load(); got != before+1 {
			t.Errorf("%s was answered from the shield", what)
		}
	}
	step("the poll of a released operation")
	next := l
	next.Owner = "another-operation"
	if _, err := e.g.guard.St.Acquire(t.Context(), next); err != nil {
		t.Fatal(err)
	}
	step("the first poll of the next operation")
}

// TestPollRetryAfter: the broker's Retry-After (seconds or HTTP-date)
// reaches the platform unchanged; poll.retry_after adds one, in whole
// seconds rounded up, to a 200 that has none; a malformed one is a
// response finding (reported: passed on; enforced: 502).
func TestPollRetryAfter(t *testing.T) {
	httpDate := "Fri, 09 Jan 2026 10:00:30 GMT"
	for _, tt := range []struct {
		name       string
		set        shieldSettings
		status     int
		retryAfter string // the broker's
		tracked    bool
		binding    bool
		wantStatus int
		want       string // the platform's Retry-After
	}{
		{name: "seconds", retryAfter: "7", want: "7"},
		{name: "seconds tracked", retryAfter: "7", tracked: true, want: "7"},
		{name: "HTTP-date", retryAfter: httpDate, want: httpDate},
		{name: "HTTP-date tracked", retryAfter: httpDate, tracked: true, want: httpDate},
		{name: "binding", retryAfter: "7", binding: true, want: "7"},
		{name: "none", want: ""},
		{name: "added", set: shieldSettings{retryAfter: "2500ms"}, want: "3"},
		{name: "added tracked", set: shieldSettings{retryAfter: "10s"}, tracked: true, want: "10"},
		{name: "added to a binding", set: shieldSettings{retryAfter: "1ms"}, binding: true, want: "1"},
		{name: "not added over the broker's", set: shieldSettings{retryAfter: "10s"}, retryAfter: httpDate, want: httpDate},
		{name: "not added to an error", set: shieldSettings{retryAfter: "10s"}, status: 500, wantStatus: 500, want: ""},
		{name: "malformed, reported", retryAfter: "in a while", want: "in a while"},
		{name: "malformed, reported, tracked", retryAfter: "1.5", tracked: true, want: "1.5"},
		{name: "malformed, enforced", set: shieldSettings{responses: "enforce"}, retryAfter: "in a while", wantStatus: 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newShieldEnv(t, tt.set)
			path := lastOpPath("i1", "op-1")
			if tt.tracked {
				path = lastOpPath("i1", e.provision(t, "i1"))
			}
			if tt.binding {
				path = "/v2/service_instances/i1/service_bindings/b1/last_operation"
			}
			status, body := 200, `{"state":"in progress"}`
			if tt.status != 0 {
				status, body = tt.status, `{"description":"down"}`
			}
			e.broker.answer(status, body, tt.retryAfter)
			r := e.poll(t.Context(), path, "rid")
			want := 200
			if tt.wantStatus != 0 {
				want = tt.wantStatus
			}
			if r.status != want {
				t.Fatalf("status %d, want %d: %s", r.status, want, r.body)
			}
			if r.status == 502 {
				if !strings.Contains(r.body, "response.last_operation.retry_after") {
					t.Errorf("502 does not name the rule: %s", r.body)
				}
				return
			}
			if got := r.header.Values("Retry-After"); !cmp.Equal(got, nonEmpty(tt.want)) {
				t.Errorf("Retry-After %q, want %q", got, tt.want)
			}
			if r.body != body {
				t.Errorf("body %q, want the broker's %q", r.body, body)
			}
		})
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// TestPollShieldPassesOnePollUnchanged: a single shielded poll reaches the
// platform with the broker's status, headers and body bytes.
func TestPollShieldPassesOnePollUnchanged(t *testing.T) {
	e := newShieldEnv(t, shieldSettings{})
	op := e.provision(t, "i1")
	body := " {\"state\" : \"in progress\",\n  \"description\":\"50% \\u00e9\"}\n"
	e.broker.answer(200, body, "4")
	e.broker.mu.Lock()
	e.broker.header.Set("X-Broker-Extra", "kept")
	e.broker.mu.Unlock()

	req, _ := http.NewRequest("GET", e.direct+lastOpPath("i1", op), nil)
	req.SetBasicAuth("sample", "sample-secret")
	req.Header.Set("X-Broker-API-Version", "2.15")
	req.Header.Set("X-Broker-API-Request-Identity", "rid")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	direct, _ := io.ReadAll(res.Body)
	res.Body.Close()
	through := e.poll(t.Context(), lastOpPath("i1", op), "rid")
	if through.status != res.StatusCode || through.body != string(direct) {
		t.Errorf("through the gateway %d %q, directly %d %q", through.status, through.body, res.StatusCode, direct)
	}
	res.Header.Del("Date")
	through.header.Del("Date")
	if diff := cmp.Diff(res.Header, through.header); diff != "" {
		t.Errorf("headers (-direct +gateway):\n%s", diff)
	}
}

func TestPollKeyInjective(t *testing.T) {
	key := func(op, service string) string {
		s := &Scope{Call: rules.Call{InstanceID: "i", Operation: op, ServiceID: service}, Polled: &store.Lock{Owner: "o"}}
		return emulate.PollKey(s, httptest.NewRequest("GET", "/", nil))
	}
	if a, b := key("a\x00b", ""), key("a", "b"); a == b {
		t.Errorf("two polls share the key %q", a)
	}
	if a, b := key("ab", "c"), key("a", "bc"); a == b {
		t.Errorf("two polls share the key %q", a)
	}
}
