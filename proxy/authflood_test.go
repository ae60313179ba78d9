package proxy

// Regression tests of issue 28's authentication under floods: wrong
// passwords from many addresses, a locked-out right password, and a cold
// start's parallel checks. Real HTTP over loopback on both listeners, real
// bcrypt hashes; the comparisons are held or counted through
// authGate.compare, never timed.

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/osb-gateway/osb-gateway/internal/config"
	"github.com/osb-gateway/osb-gateway/internal/osbtest"
)

// floodYAML is one tenant whose credential is a bcrypt hash, with the
// listen and auth sections given.
const floodYAML = `
listen: {address: "127.0.0.1:0"%s}
admin: {address: "off"}
auth: {%s}
brokers:
  - name: b1
    url: ${B1_URL}
tenants:
  - name: t1
    credentials: [{username: t1-user, password: "${T1_HASH}"}]
    routes: [{broker: b1}]
`

// floodServer is a Gateway serving floodYAML on one listener.
type floodServer struct {
	*Gateway
	url     string       // of a last_operation poll
	arrived atomic.Int32 // requests the listener handed the Gateway
	// compare is what the Gateway's authGate.compare calls: set through an
	// atomic once the listener runs, so that the race detector sees it
	// set before the requests sent after it (loopback sockets are no
	// synchronisation it knows of).
	compare atomic.Pointer[func(hash, pass []byte) error]
}

// setCompare makes f the bcrypt comparison of the gateway's checks.
func (s *floodServer) setCompare(f func(hash, pass []byte) error) { s.compare.Store(&f) }

func (s *floodServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.arrived.Add(1)
	s.Gateway.ServeHTTP(w, r)
}

// floodGateway starts a gateway for floodYAML on each listener and calls f
// with it, in a subtest per listener.
func floodGateway(t *testing.T, listen, auth string, now func() time.Time, f func(t *testing.T, g *floodServer)) {
	b1 := osbtest.NewBroker(t, nil)
	vars := map[string]string{"B1_URL": b1.URL, "T1_HASH": string(hashOf(t, t1Pass, bcrypt.MinCost))}
	cfg, err := config.Parse(fmt.Appendf(nil, floodYAML, listen, auth), config.Options{LookupEnv: func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}})
	if err != nil {
		t.Fatal(err)
	}
	servers := []struct {
		name  string
		serve func(t *testing.T, h http.Handler) string
	}{
		{"standard", func(t *testing.T, h http.Handler) string {
			srv := httptest.NewServer(h)
			t.Cleanup(srv.Close)
			return srv.URL
		}},
		{"lean", leanServe},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			g, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler), Now: now})
			if err != nil {
				t.Fatal(err)
			}
			fs := &floodServer{Gateway: g}
			fs.setCompare(bcrypt.CompareHashAndPassword)
			g.auth.Compare = func(hash, pass []byte) error { return (*fs.compare.Load())(hash, pass) }
			fs.url = s.serve(t, fs) + "/t1/b1/v2/service_instances/x/last_operation"
			f(t, fs)
		})
	}
}

// floodAnswer is one answer to a request of a flood test.
type floodAnswer struct {
	status     int
	retryAfter string
	body       string
	err        error
}

// get sends GET url as user and pass from the loopback address ip.
func get(t *testing.T, ip, url, user, pass string) floodAnswer {
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth(user, pass)
	req.Header.Set("X-Broker-API-Version", "2.14")
	res, err := clientFrom(t, ip).Do(req)
	if err != nil {
		return floodAnswer{err: err}
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return floodAnswer{status: res.StatusCode, retryAfter: res.Header.Get("Retry-After"), body: string(b)}
}

// waitUntil waits for cond, failing with what after 30 s: long enough for
// a loaded machine, and only reached when the gateway is wrong.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// heldCompare is an authGate.compare that holds every comparison of a
// wrong password (anything but t1Pass) until release is closed, then makes
// it with bcrypt; right passwords are compared at once.
type heldCompare struct {
	entered atomic.Int32 // wrong passwords being compared
	release chan struct{}
}

func (h *heldCompare) compare(hash, pass []byte) error {
	if string(pass) != t1Pass {
		h.entered.Add(1)
		<-h.release
	}
	return bcrypt.CompareHashAndPassword(hash, pass)
}

// Issue 28 item 6: wrong passwords from 127.0.0.2–.200 at 40/s, each
// attacker holding 60 s, filled listen.max_in_flight with waiters for the
// bcrypt slots, and legitimate reads with an already-verified credential
// got 503 "overloaded". Now at most auth.bcrypt_queue checks wait (one
// more gets 429 with Retry-After at once), waiting and hashing checks do
// not count against max_in_flight, and a verified credential waits for
// neither: here, with the one slot held and the queue full (17 attackers
// held, more than max_in_flight), more verified reads than max_in_flight
// pass while the attackers still wait.
func TestPasswordFloodFromManyAddressesDoesNotShedVerifiedCalls(t *testing.T) {
	// One bcrypt slot and the default queue (16 per slot); more attackers
	// than max_in_flight, more than the slot and the queue hold.
	const maxInFlight, queue, attackers = 8, 16, 1 + 16 + 4 // queue: config.DefaultBcryptQueuePerSlot
	floodGateway(t, fmt.Sprintf(", max_in_flight: %d", maxInFlight), "bcrypt_concurrency: 1", time.Now,
		func(t *testing.T, g *floodServer) {
			url := g.url
			held := &heldCompare{release: make(chan struct{})}
			g.setCompare(held.compare)
			if a := get(t, "127.0.0.1", url, t1User, t1Pass); a.status != 200 {
				t.Fatalf("first legitimate read (verifies the credential): %+v", a)
			}

			answers := make(chan floodAnswer, attackers)
			var answered atomic.Int32
			var wg sync.WaitGroup
			defer func() { // never leave the attackers held, whatever failed
				select {
				case <-held.release:
				default:
					close(held.release)
				}
				wg.Wait()
			}()
			// One attacker at a time, each settled (answered, comparing,
			// or waiting for the slot) before the next: a check that waits
			// leaves max_in_flight only once it waits, so attackers sent
			// all at once could be shed (503) on their way there, which is
			// not what this test is about.
			for i := range attackers {
				ip := fmt.Sprintf("127.0.0.%d", i+2)
				wg.Go(func() {
					a := get(t, ip, url, t1User, fmt.Sprintf("wrong-%d", i))
					answered.Add(1)
					answers <- a
				})
				waitUntil(t, fmt.Sprintf("attacker %d answered, hashing or waiting", i+1), func() bool {
					return answered.Load()+held.entered.Load()+g.auth.Waiting() == int32(i+1)
				})
			}
			if n := held.entered.Load(); n != 1 {
				t.Fatalf("%d wrong passwords being compared, want 1 (the slot)", n)
			}

			for i := range maxInFlight + 2 {
				if a := get(t, "127.0.0.1", url, t1User, t1Pass); a.status != 200 {
					t.Fatalf("verified read %d while the bcrypt slot is held by the flood: %d %s (want 200)", i, a.status, a.body)
				}
			}
			if e, w := held.entered.Load(), g.auth.Waiting(); e != 1 || w != queue {
				t.Fatalf("after the verified reads: %d comparing, %d waiting; want the flood still held (1, %d)", e, w, queue)
			}
			for range attackers - 1 - queue { // the queue was full for these
				a := <-answers
				if a.status != http.StatusTooManyRequests || a.retryAfter != "1" ||
					!strings.Contains(a.body, "auth.bcrypt_queue") || strings.Contains(a.body, "wrong-") {
					t.Errorf("attacker beyond the queue: %+v; want 429, Retry-After 1, a description naming auth.bcrypt_queue", a)
				}
			}
			close(held.release)
			for range 1 + queue {
				if a := <-answers; a.status != http.StatusUnauthorized {
					t.Errorf("attacker that waited: %+v, want 401", a)
				}
			}
			if n := g.protect.Overload.InFlight(); n != 0 {
				t.Errorf("%d calls still counted in flight", n)
			}
		})
}

// The answer to a check beyond the bcrypt queue.
func TestBcryptQueueFullAnswer(t *testing.T) {
	floodGateway(t, "", "bcrypt_concurrency: 1, bcrypt_queue: 1", time.Now, func(t *testing.T, g *floodServer) {
		url := g.url
		if t.Name() != "TestBcryptQueueFullAnswer/standard" {
			t.Skip("the answer is the same on both listeners")
		}
		held := &heldCompare{release: make(chan struct{})}
		g.setCompare(held.compare)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer close(held.release)
		for i := range 2 {
			wg.Go(func() { get(t, fmt.Sprintf("127.0.0.%d", i+2), url, t1User, fmt.Sprintf("wrong-%d", i)) })
		}
		waitUntil(t, "one comparing, one waiting", func() bool {
			return held.entered.Load() == 1 && g.auth.Waiting() == 1
		})
		req, _ := http.NewRequest("GET", url, nil)
		req.SetBasicAuth(t1User, "wrong-x")
		req.Header.Set("X-Broker-API-Version", "2.14")
		res, err := clientFrom(t, "127.0.0.9").Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		checkGolden(t, "auth_bcrypt_busy", res, string(body))
	})
}

// Issue 28 item 7: after ten wrong passwords from one address, the
// per-address failure limit (burst 10, then 1/s) refused every request
// from it with 429 "too many refused credentials", right credentials
// included: a platform behind the same NAT as one misconfigured client was
// locked out. Now the limit is on hashing: a pair already verified from
// that address passes (without bcrypt). A pair never verified from a
// limited address is still limited, right or wrong: otherwise a limited
// address could test guesses against the cache of verified pairs at no
// cost.
func TestTenWrongPasswordsFromOneAddressDoNotLockOutTheRightOne(t *testing.T) {
	clock := osbtest.NewClock(time.Date(2026, 11, 22, 3, 0, 0, 0, time.UTC)) // never advanced: no failure comes back
	floodGateway(t, "", "failures: {rate: 1, burst: 10}", clock.Now, func(t *testing.T, g *floodServer) {
		url := g.url
		var log compareLog
		g.setCompare(log.compare)
		step := func(name, ip, pass string, status, compared int) {
			t.Helper()
			a := get(t, ip, url, t1User, pass)
			if a.status != status {
				t.Fatalf("%s: %d %s, want %d", name, a.status, a.body, status)
			}
			if n := len(log.take()); n != compared {
				t.Errorf("%s: %d bcrypt comparisons, want %d", name, n, compared)
			}
		}
		step("the platform verifies its credential", "127.0.0.3", t1Pass, 200, 1)
		for i := range 10 {
			step(fmt.Sprintf("wrong password %d from the same address", i+1), "127.0.0.3", fmt.Sprintf("wrong-%d", i), 401, 1)
		}
		step("the 11th wrong password", "127.0.0.3", "wrong-10", 429, 0)
		step("the right password from the limited address", "127.0.0.3", t1Pass, 200, 0)
		step("and again", "127.0.0.3", t1Pass, 200, 0)
		step("a wrong password is still limited", "127.0.0.3", "wrong-11", 429, 0)

		for i := range 10 {
			step(fmt.Sprintf("wrong password %d from another address", i+1), "127.0.0.4", fmt.Sprintf("other-%d", i), 401, 1)
		}
		step("the right password, never verified from that limited address", "127.0.0.4", t1Pass, 429, 0)
	})
}

// Issue 28 item 11: 32 parallel first requests with the right bcrypt
// credential after a start each ran their own bcrypt (977 ms against 223
// ms once cached). Now concurrent checks of one username and password
// share one comparison: here all 32 are waiting on it (none counted in
// flight any more, the comparison held) before it is let go, and bcrypt
// ran once.
func TestColdStartHashesACredentialOnce(t *testing.T) {
	const parallel = 32
	floodGateway(t, "", "", time.Now, func(t *testing.T, g *floodServer) {
		url := g.url
		var compared atomic.Int32
		release := make(chan struct{})
		g.setCompare(func(hash, pass []byte) error {
			compared.Add(1)
			<-release
			return bcrypt.CompareHashAndPassword(hash, pass)
		})
		answers := make(chan floodAnswer, parallel)
		var wg sync.WaitGroup
		for range parallel {
			wg.Go(func() { answers <- get(t, "127.0.0.1", url, t1User, t1Pass) })
		}
		defer wg.Wait()
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()
		// Each request counts in flight from the overload stage until it
		// reaches the check; there, it waits out of the count: all are
		// waiting on the held comparison once all arrived and none counts.
		waitUntil(t, fmt.Sprintf("%d requests waiting on one comparison, none counted in flight", parallel), func() bool {
			return g.arrived.Load() == parallel && g.protect.Overload.InFlight() == 0 && compared.Load() >= 1
		})
		released = true
		close(release)
		for range parallel {
			if a := <-answers; a.status != 200 {
				t.Errorf("first request: %+v, want 200", a)
			}
		}
		if n := compared.Load(); n != 1 {
			t.Errorf("%d bcrypt comparisons for %d parallel first requests with one credential, want 1", n, parallel)
		}
	})
}
