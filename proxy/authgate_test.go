package proxy

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/crypto/bcrypt"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
	"github.com/osb-gateway/osb-gateway/proxy/internal/auth"
)

// testAddr is the client address of checks that call verify directly.
var testAddr = netip.MustParseAddr("192.0.2.1")

// testAuthGate is newAuthGate for the auth section a, defaults filled in.
func testAuthGate(tb testing.TB, a config.Auth, now func() time.Time) *auth.Gate {
	tb.Helper()
	c := config.Config{Auth: a}
	c.ApplyDefaults()
	g, err := auth.NewGate(c.Auth, now, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return g
}

// compareLog records the cost of every bcrypt comparison made through it.
type compareLog struct {
	mu    sync.Mutex
	costs []int
}

func (l *compareLog) compare(hash, pass []byte) error {
	cost, err := bcrypt.Cost(hash)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.costs = append(l.costs, cost)
	l.mu.Unlock()
	return bcrypt.CompareHashAndPassword(hash, pass)
}

// take returns the costs recorded since the last take, sorted.
func (l *compareLog) take() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := l.costs
	l.costs = nil
	slices.Sort(c)
	return c
}

func hashOf(t testing.TB, pass string, cost int) config.Secret {
	t.Helper()
	h, err := bcrypt.GenerateFromPassword([]byte(pass), cost)
	if err != nil {
		t.Fatal(err)
	}
	return config.Secret(h)
}

// A wrong password took ~59 ms for an existing bcrypt user and ~0.8 ms for
// an unknown one, so timing told which usernames exist. Now every refused
// password of a tenant with bcrypt credentials makes the same comparisons
// (counted here rather than timed): an unknown username, or a plain
// credential's, is compared with a dummy hash of the tenant's cost.
func TestWrongPasswordCostsTheSameForEveryUsername(t *testing.T) {
	const low, high = bcrypt.MinCost, bcrypt.MinCost + 1
	tenants := map[string]*config.Tenant{
		"one bcrypt user and a plain one": {Name: "single", Credentials: []config.Credential{
			{Username: "hashed", Password: hashOf(t, "hashed-pass", low)},
			{Username: "plain", Password: "plain-pass"},
		}},
		"a password being rotated": {Name: "rotating", Credentials: []config.Credential{
			{Username: "cc", Password: hashOf(t, "old-pass", low)},
			{Username: "cc", Password: hashOf(t, "new-pass", low)},
			{Username: "other", Password: hashOf(t, "other-pass", low)},
		}},
		"two costs": {Name: "costs", Credentials: []config.Credential{
			{Username: "cheap", Password: hashOf(t, "cheap-pass", low)},
			{Username: "dear", Password: hashOf(t, "dear-pass", high)},
		}},
		"plain only": {Name: "plain", Credentials: []config.Credential{{Username: "plain", Password: "plain-pass"}}},
	}
	tests := []struct {
		tenant, name, user, pass string
		valid                    bool
		costs                    []int
	}{
		{"one bcrypt user and a plain one", "known user, wrong password", "hashed", "nope", false, []int{low}},
		{"one bcrypt user and a plain one", "unknown user", "nobody", "nope", false, []int{low}},
		{"one bcrypt user and a plain one", "plain user, wrong password", "plain", "nope", false, []int{low}},
		{"one bcrypt user and a plain one", "known user, right password", "hashed", "hashed-pass", true, []int{low}},
		{"one bcrypt user and a plain one", "plain user, right password", "plain", "plain-pass", true, nil},
		{"a password being rotated", "rotated user, wrong password", "cc", "nope", false, []int{low, low}},
		{"a password being rotated", "other user, wrong password", "other", "nope", false, []int{low, low}},
		{"a password being rotated", "unknown user", "nobody", "nope", false, []int{low, low}},
		{"a password being rotated", "rotated user, new password", "cc", "new-pass", true, []int{low, low}},
		{"two costs", "unknown user: the dearest cost", "nobody", "nope", false, []int{high}},
		{"two costs", "dear user, wrong password", "dear", "nope", false, []int{high}},
		{"plain only", "unknown user: no bcrypt at all", "nobody", "nope", false, nil},
		{"plain only", "known user, wrong password", "plain", "nope", false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.tenant+"/"+tc.name, func(t *testing.T) {
			g := testAuthGate(t, config.Auth{}, time.Now)
			var log compareLog
			g.Compare = log.compare
			tn := mustTenant(t, tenants[tc.tenant])
			_, err := tn.Verify(context.Background(), g, testAddr, []byte(tc.user), []byte(tc.pass))
			if (err == nil) != tc.valid {
				t.Fatalf("verify = %v, want valid %v", err, tc.valid)
			}
			if diff := cmp.Diff(tc.costs, log.take()); diff != "" {
				t.Errorf("bcrypt comparisons by cost (-want +got):\n%s", diff)
			}
		})
	}
}

// 40 wrong passwords a second took legitimate calls from p50 0.5 ms to 181
// ms: every one ran bcrypt at once. Now at most bcrypt_concurrency run;
// the others wait, for as long as their request lasts.
func TestBcryptSlotsBoundConcurrentChecks(t *testing.T) {
	g := testAuthGate(t, config.Auth{BcryptConcurrency: 2}, time.Now)
	release := make(chan struct{})
	var in, most atomic.Int32
	g.Compare = func(hash, pass []byte) error {
		n := in.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		in.Add(-1)
		return bcrypt.ErrMismatchedHashAndPassword
	}
	tn := mustTenant(t, &config.Tenant{Name: "t", Credentials: []config.Credential{{Username: "u", Password: hashOf(t, "p", bcrypt.MinCost)}}})
	type result struct {
		i      int
		status int
	}
	results := make(chan result, 4)
	check := func(ctx context.Context, i int) {
		go func() {
			status := 200
			// Each from its own address, with its own password: neither the
			// failure limit nor the cache of refusals is in play.
			addr := netip.AddrFrom4([4]byte{192, 0, 2, byte(i + 1)})
			if _, err := tn.Verify(ctx, g, addr, []byte("u"), []byte{'x', byte('0' + i)}); err != nil {
				status = err.Status
			}
			results <- result{i, status}
		}()
	}
	check(context.Background(), 0)
	check(context.Background(), 1)
	waitFor(t, func() bool { return in.Load() == 2 })
	ctx, cancel := context.WithCancel(context.Background())
	check(ctx, 2)
	waitFor(t, func() bool { return g.Waiting() == 1 })
	check(context.Background(), 3)
	waitFor(t, func() bool { return g.Waiting() == 2 })
	if n := in.Load(); n != 2 {
		t.Fatalf("%d comparisons running, want 2 (the slots)", n)
	}

	cancel() // the third request ends while it waits
	if r := <-results; r.i != 2 || r.status != http.StatusServiceUnavailable {
		t.Errorf("first to finish: check %d with %d; want check 2 with 503 (abandoned while waiting)", r.i, r.status)
	}
	close(release)
	for range 3 {
		if r := <-results; r.status != http.StatusUnauthorized {
			t.Errorf("check %d: status %d, want 401", r.i, r.status)
		}
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d comparisons ran at once, want 2", m)
	}
	if n := g.SlotsTaken(); n != 0 {
		t.Errorf("%d slots still taken", n)
	}
}

// A username and password refused a moment ago are refused again without
// bcrypt, until auth.failure_cache_ttl has passed.
func TestRecentlyRefusedPairIsNotHashedAgain(t *testing.T) {
	clock := osbtest.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	g := testAuthGate(t, config.Auth{FailureCacheTTL: time.Minute, Failures: config.AuthFailures{Burst: 1000}}, clock.Now)
	var log compareLog
	g.Compare = log.compare
	cfg := &config.Tenant{Name: "t", Credentials: []config.Credential{{Username: "u", Password: hashOf(t, "p", bcrypt.MinCost)}}}
	tn, other := mustTenant(t, cfg), mustTenant(t, cfg)
	steps := []struct {
		name     string
		tenant   *auth.Tenant
		pass     string
		advance  time.Duration
		compared int
	}{
		{"first refusal", tn, "wrong-a", 0, 1},
		{"same pair again", tn, "wrong-a", 0, 0},
		{"another password", tn, "wrong-b", 0, 1},
		{"same pair, 59s later", tn, "wrong-a", 59 * time.Second, 0},
		{"same pair, once the TTL passed", tn, "wrong-a", time.Second, 1},
		{"same pair at another tenant", other, "wrong-a", 0, 1},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		_, err := st.tenant.Verify(context.Background(), g, testAddr, []byte("u"), []byte(st.pass))
		if err == nil || err.Status != http.StatusUnauthorized {
			t.Fatalf("%s: %v, want 401", st.name, err)
		}
		if n := len(log.take()); n != st.compared {
			t.Errorf("%s: %d bcrypt comparisons, want %d", st.name, n, st.compared)
		}
	}
}

// authLimitYAML is one tenant whose credential is a bcrypt hash, and a
// failure limit of 3 in a row, then 1 per second.
const authLimitYAML = `
listen: {address: "127.0.0.1:0"}
admin: {address: "off"}
auth:
  failures: {rate: 1, burst: 3}
brokers:
  - name: b1
    url: ${B1_URL}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: "${T1_HASH}"}]
    routes: [{broker: b1}]
`

// Wrong passwords had no limit and never got 429. Now refused credentials
// are counted per client address (the connection's, never
// X-Forwarded-For); over the limit, a request gets 429 with Retry-After and
// its credentials are not checked, unless they are a pair already verified
// from that address. A success does not count, and a reload keeps the
// counts.
func TestRefusedCredentialsAreLimitedPerAddress(t *testing.T) {
	b1 := osbtest.NewBroker(t, nil)
	vars := map[string]string{"B1_URL": b1.URL, "T1_HASH": string(hashOf(t, t1Pass, bcrypt.MinCost))}
	cfg, err := config.Parse([]byte(authLimitYAML), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	clock := osbtest.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC))
	var log compareLog
	serve := func(prev *Gateway) (*Gateway, string) {
		g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: clock.Now, Previous: prev})
		if err != nil {
			t.Fatal(err)
		}
		g.auth.Compare = log.compare
		srv := httptest.NewServer(g)
		t.Cleanup(srv.Close)
		return g, srv.URL
	}
	g, url := serve(nil)
	from := map[string]*http.Client{"127.0.0.1": http.DefaultClient, "127.0.0.2": clientFrom(t, "127.0.0.2")}
	steps := []struct {
		name     string
		from     string // client address
		pass     string
		xff      string // X-Forwarded-For
		advance  time.Duration
		reload   bool
		status   int
		compared int
		golden   string
	}{
		{name: "1st wrong password", from: "127.0.0.1", pass: "wrong-1", status: 401, compared: 1},
		{name: "2nd wrong password", from: "127.0.0.1", pass: "wrong-2", status: 401, compared: 1},
		{name: "right password: does not count", from: "127.0.0.1", pass: t1Pass, status: 200, compared: 1},
		{name: "3rd: a repeated refusal, answered without bcrypt", from: "127.0.0.1", pass: "wrong-1", status: 401},
		{name: "over the limit", from: "127.0.0.1", pass: "wrong-3", status: 429, golden: "auth_too_many"},
		{name: "over the limit: a pair verified from this address passes, without bcrypt", from: "127.0.0.1", pass: t1Pass, status: 200},
		{name: "X-Forwarded-For is not believed", from: "127.0.0.1", pass: "wrong-4", xff: "198.51.100.7", status: 429},
		{name: "another address is not limited", from: "127.0.0.2", pass: "wrong-5", status: 401, compared: 1},
		{name: "a second later: one more", from: "127.0.0.1", pass: "wrong-6", advance: time.Second, status: 401, compared: 1},
		{name: "and no more", from: "127.0.0.1", pass: "wrong-7", status: 429},
		{name: "a reload keeps the counts", from: "127.0.0.1", pass: "wrong-8", reload: true, status: 429},
	}
	for _, st := range steps {
		clock.Advance(st.advance)
		if st.reload {
			g, url = serve(g)
		}
		req, _ := http.NewRequest("GET", url+"/t1/b1/v2/service_instances/x/last_operation", nil)
		req.SetBasicAuth(t1User, st.pass)
		req.Header.Set("X-Broker-API-Version", "2.14")
		if st.xff != "" {
			req.Header.Set("X-Forwarded-For", st.xff)
		}
		res, err := from[st.from].Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body strings.Builder
		_, _ = io.Copy(&body, res.Body)
		res.Body.Close()
		if res.StatusCode != st.status {
			t.Fatalf("%s: status %d, want %d: %s", st.name, res.StatusCode, st.status, body.String())
		}
		if n := len(log.take()); n != st.compared {
			t.Errorf("%s: %d bcrypt comparisons, want %d", st.name, n, st.compared)
		}
		if st.status == 429 && res.Header.Get("Retry-After") != "1" {
			t.Errorf("%s: Retry-After %q, want 1", st.name, res.Header.Get("Retry-After"))
		}
		if st.golden != "" {
			checkGolden(t, st.golden, res, body.String())
		}
	}
}

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (any of 127.0.0.0/8 reaches the loopback listeners).
func clientFrom(t *testing.T, ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestClientAddr(t *testing.T) {
	for _, tc := range []struct{ remote, want string }{
		{"192.0.2.1:4711", "192.0.2.1"},
		{"[::ffff:192.0.2.1]:4711", "192.0.2.1"},
		{"[2001:db8:1:2:3:4:5:6]:4711", "2001:db8:1:2::"},
		{"[2001:db8:1:2::9%eth0]:4711", "2001:db8:1:2::"},
		{"@", "invalid IP"},
		{"", "invalid IP"},
	} {
		if got := auth.ClientAddr(tc.remote).String(); got != tc.want {
			t.Errorf("clientAddr(%q) = %s, want %s", tc.remote, got, tc.want)
		}
	}
}
