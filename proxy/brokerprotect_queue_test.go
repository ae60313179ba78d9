package proxy

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// gateBroker answers every call with 200 {} once the test lets it: each
// call announces its path on arrived, then waits for one value on release.
// It has no catalog.
type gateBroker struct {
	arrived chan string
	release chan struct{}
	quit    chan struct{} // closed when the test ends: waiting calls end
}

// startGateBroker serves a gateBroker on loopback until the test ends.
func startGateBroker(t *testing.T) (*gateBroker, string) {
	t.Helper()
	b := &gateBroker{arrived: make(chan string, 64), release: make(chan struct{}), quit: make(chan struct{})}
	srv := httptestServer(t, b)
	t.Cleanup(func() { close(b.quit) }) // before the server closes
	return b, srv.URL
}

func (b *gateBroker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/v2/catalog" { // none: calls are forwarded without it (validation.without_catalog)
		w.WriteHeader(http.StatusNotFound)
		return
	}
	b.arrived <- r.URL.Path
	select {
	case <-b.release:
	case <-r.Context().Done():
		return
	case <-b.quit:
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{}`))
}

// let lets one waiting call answer.
func (b *gateBroker) let(t *testing.T) {
	t.Helper()
	select {
	case b.release <- struct{}{}:
	case <-time.After(5 * time.Second):
		t.Fatal("no call waited at the broker within 5s")
	}
}

// await returns the reply that comes on ch.
func await(t *testing.T, ch <-chan callReply) callReply {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no answer within 10s")
		return callReply{}
	}
}

// next returns the path of the next call to arrive at the broker.
func (b *gateBroker) next(t *testing.T) string {
	t.Helper()
	select {
	case p := <-b.arrived:
		return p
	case <-time.After(5 * time.Second):
		t.Fatal("no call reached the broker within 5s")
		return ""
	}
}

// instance is the fetch path of instance id: a read the guard does not
// lock.
func instance(id string) string { return "/v2/service_instances/" + id }

// TestQueueFairAcrossTenants: with one slot, a tenant flooding the broker
// and one trickling, the trickling tenant's call is served after at most
// one more of the flooder's, whatever the flooder queued before it; each
// tenant's calls keep their order. The broker blocks every call until the
// test releases it, so the order is decided by the queue alone.
func TestQueueFairAcrossTenants(t *testing.T) {
	b, url := startGateBroker(t)
	e := newProtectEnv(t, url, "    max_in_flight: 1\n    queue_timeout: 1m")

	var replies []<-chan callReply
	replies = append(replies, e.sendInBackground(t, t.Context(), "t1", "GET", instance("f0")))
	got := []string{b.next(t)} // f0 holds the slot
	for i, id := range []string{"f1", "f2", "f3", "f4"} {
		replies = append(replies, e.sendInBackground(t, t.Context(), "t1", "GET", instance(id)))
		waitFor(t, func() bool { _, q := e.queueCounts(); return q == i+1 })
	}
	replies = append(replies, e.sendInBackground(t, t.Context(), "t2", "GET", instance("s0")))
	waitFor(t, func() bool { _, q := e.queueCounts(); return q == 5 })
	for range 5 {
		b.let(t)
		got = append(got, b.next(t))
	}
	b.let(t)
	want := []string{instance("f0"), instance("f1"), instance("s0"), instance("f2"), instance("f3"), instance("f4")}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("order the broker served the calls in (-want +got):\n%s", diff)
	}
	for _, ch := range replies {
		if r := await(t, ch); r.err != nil || r.status != http.StatusOK {
			t.Errorf("a queued call got %d %v %s", r.status, r.err, r.body)
		}
	}
	if in, q := e.queueCounts(); in != 0 || q != 0 {
		t.Errorf("after the calls: %d in flight, %d queued; want none", in, q)
	}
	if v := e.metric(t, `osb_gateway_broker_queued_total{broker="b",tenant="t1"}`); v != "4" {
		t.Errorf("t1's queued calls: %s, want 4", v)
	}
	if v := e.metric(t, `osb_gateway_broker_queue_wait_seconds_count{broker="b",tenant="t2"}`); v != "1" {
		t.Errorf("t2's queue waits observed: %s, want 1", v)
	}
}

// TestQueueTimeout: a call that gets no slot within queue_timeout is
// answered 429 (mutating) or 503 (read) with Retry-After, never reaches the
// broker and leaves no lock; the timer is the test's, fired once the call
// waits.
func TestQueueTimeout(t *testing.T) {
	b, url := startGateBroker(t)
	e := newProtectEnv(t, url, "    max_in_flight: 1\n    queue_timeout: 80s")
	timers := &fakeTimers{started: make(chan chan time.Time, 1)}
	e.g.brokerProtect["b"].Queue.Timer = timers.start

	first := e.sendInBackground(t, t.Context(), "t1", "GET", instance("held"))
	b.next(t)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		endpoint                 string
	}{
		{"provision", "PUT", "/v2/service_instances/i1", syncProvisionBody, http.StatusTooManyRequests, "provision"},
		{"fetch", "GET", instance("i1"), "", http.StatusServiceUnavailable, "get_instance"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan callReply, 1)
			req := e.request(t, t.Context(), "t2", tc.method, tc.path, tc.body)
			go func() { ch <- roundTrip(req) }()
			fire := <-timers.started
			fire <- time.Time{}
			r := await(t, ch)
			if r.status != tc.status || r.header.Get("Retry-After") != "80" {
				t.Fatalf("got %d Retry-After %q %s; want %d Retry-After 80", r.status, r.header.Get("Retry-After"), r.body, tc.status)
			}
			want := `{"description":"broker \"b\" has 1 calls in flight, its cap (brokers[].max_in_flight), and no slot freed within 1m20s ` +
				`(brokers[].queue_timeout) for this call of tenant \"t2\"; it was not sent to the broker, retry after 80s"}`
			if strings.TrimSpace(r.body) != want {
				t.Errorf("body:\n%s\nwant:\n%s", r.body, want)
			}
			if ls := e.locks(t); len(ls) != 0 {
				t.Errorf("locks after the refusal: %+v", ls)
			}
		})
	}
	b.let(t)
	if r := await(t, first); r.status != http.StatusOK {
		t.Errorf("the call holding the slot: %d %s", r.status, r.body)
	}
	select {
	case p := <-b.arrived:
		t.Errorf("a refused call reached the broker: %s", p)
	default:
	}
	want := []recordSummary{
		{Tenant: "t1", Endpoint: "get_instance", Status: 200},
		{Tenant: "t2", Endpoint: "get_instance", Status: 503, Protection: ProtectionQueueTimeout},
		{Tenant: "t2", Endpoint: "provision", Status: 429, Protection: ProtectionQueueTimeout},
	}
	waitFor(t, func() bool { return len(e.records()) == len(want) }) // written after the answers
	if diff := cmp.Diff(want, e.records(), sortRecords); diff != "" {
		t.Errorf("audit records (-want +got):\n%s", diff)
	}
	if v := e.metric(t, `osb_gateway_broker_queue_timeouts_total{broker="b",tenant="t2"}`); v != "2" {
		t.Errorf("t2's queue timeouts: %s, want 2", v)
	}
}

// TestQueueTimeoutZeroRefusesAtOnce: queue_timeout 0s makes a call over
// the cap wait for nothing: 503 (a read) with Retry-After 1.
func TestQueueTimeoutZeroRefusesAtOnce(t *testing.T) {
	b, url := startGateBroker(t)
	e := newProtectEnv(t, url, "    max_in_flight: 1\n    queue_timeout: 0s")
	first := e.sendInBackground(t, t.Context(), "t1", "GET", instance("held"))
	b.next(t)
	r := e.send(t, "t1", "GET", instance("other"), "")
	if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "1" ||
		!strings.Contains(r.body, "calls over it do not wait (brokers[].queue_timeout is 0s)") {
		t.Errorf("got %d Retry-After %q %s", r.status, r.header.Get("Retry-After"), r.body)
	}
	b.let(t)
	await(t, first)
}

// TestQueueLeftByAPlatformThatHangsUp: a platform that hangs up while its
// call waits takes the call out of the queue; the slot then goes to the
// next call, not to the gone one.
func TestQueueLeftByAPlatformThatHangsUp(t *testing.T) {
	b, url := startGateBroker(t)
	e := newProtectEnv(t, url, "    max_in_flight: 1\n    queue_timeout: 1m")
	first := e.sendInBackground(t, t.Context(), "t1", "GET", instance("held"))
	b.next(t)
	ctx, cancel := context.WithCancel(t.Context())
	gone := e.sendInBackground(t, ctx, "t2", "GET", instance("gone"))
	waitFor(t, func() bool { _, q := e.queueCounts(); return q == 1 })
	cancel()
	if r := await(t, gone); r.err == nil {
		t.Fatalf("the cancelled call got an answer: %d", r.status)
	}
	waitFor(t, func() bool { _, q := e.queueCounts(); return q == 0 })
	b.let(t)
	await(t, first)
	waitFor(t, func() bool { in, _ := e.queueCounts(); return in == 0 })
	next := e.sendInBackground(t, t.Context(), "t2", "GET", instance("next"))
	if p := b.next(t); p != instance("next") {
		t.Errorf("the broker got %s, want the next call", p)
	}
	b.let(t)
	if r := await(t, next); r.status != http.StatusOK {
		t.Errorf("the next call: %d %s", r.status, r.body)
	}
}

// TestQueueSlotHeldByAShimmedCall: a call the async shim answered 202 for
// keeps its slot while the broker call runs on; the next call waits for
// it, and gets it when the broker answers.
func TestQueueSlotHeldByAShimmedCall(t *testing.T) {
	b, url := startGateBroker(t)
	timers := &fakeTimers{started: make(chan chan time.Time, 1)}
	e := newProtectEnvWith(t, url, "    max_in_flight: 1\n    emulate: {async_after: 1s}",
		func(o *Options) { o.Timer = timers.start })
	prov := e.request(t, t.Context(), "t1", "PUT", "/v2/service_instances/i1?accepts_incomplete=true", syncProvisionBody)
	ch := make(chan callReply, 1)
	go func() { ch <- roundTrip(prov) }()
	b.next(t)
	(<-timers.started) <- time.Time{}
	if r := await(t, ch); r.status != http.StatusAccepted {
		t.Fatalf("the shimmed provision: %d %s, want the shim's 202", r.status, r.body)
	}
	if in, _ := e.queueCounts(); in != 1 {
		t.Fatalf("after the shim's 202: %d calls in flight, want the running broker call's 1", in)
	}
	read := e.sendInBackground(t, t.Context(), "t2", "GET", instance("other"))
	waitFor(t, func() bool { _, q := e.queueCounts(); return q == 1 })
	b.let(t) // the provision's broker call ends
	if p := b.next(t); p != instance("other") {
		t.Errorf("the broker got %s, want the queued read", p)
	}
	b.let(t)
	if r := await(t, read); r.status != http.StatusOK {
		t.Errorf("the queued read: %d %s", r.status, r.body)
	}
	waitFor(t, func() bool { in, q := e.queueCounts(); return in == 0 && q == 0 })
}
