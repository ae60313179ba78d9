package samplebroker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// lineWriter hands each call-log line to the test as it is written, and
// checks that every Write is one whole line.
type lineWriter struct {
	lines chan CallRecord
	errs  chan error
}

func newLineWriter() *lineWriter {
	return &lineWriter{lines: make(chan CallRecord, 100), errs: make(chan error, 100)}
}

func (w *lineWriter) Write(p []byte) (int, error) {
	var rec CallRecord
	switch {
	case strings.Count(string(p), "\n") != 1 || p[len(p)-1] != '\n':
		w.errs <- fmt.Errorf("a Write of %q is not one line", p)
	case json.Unmarshal(p, &rec) != nil:
		w.errs <- fmt.Errorf("line %q is not a CallRecord", p)
	case strings.Contains(string(p), `"in_flight":null`):
		w.errs <- fmt.Errorf("line %q has a null in_flight", p)
	default:
		w.lines <- rec
	}
	return len(p), nil
}

// next waits for the next line; the deadline only bounds a broken test.
func (w *lineWriter) next(t *testing.T) CallRecord {
	t.Helper()
	select {
	case rec := <-w.lines:
		return rec
	case err := <-w.errs:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no call-log line within 10s")
	}
	return CallRecord{}
}

// none fails when a line was written that the test did not take.
func (w *lineWriter) none(t *testing.T) {
	t.Helper()
	select {
	case rec := <-w.lines:
		t.Errorf("unexpected line %+v", rec)
	case err := <-w.errs:
		t.Error(err)
	default:
	}
}

// gate is an Options.After the test controls: each wait reports itself on
// waiting and ends when release is closed.
type gate struct {
	waiting chan time.Duration
	release chan time.Time
}

// newGate returns a gate that the test's end opens, if the test did not,
// so that a failing test does not leave a request held (and the server's
// Close waiting for it). Call it after newFixture: cleanups run last first.
func newGate(t *testing.T) *gate {
	g := &gate{waiting: make(chan time.Duration, 10), release: make(chan time.Time)}
	t.Cleanup(g.open)
	return g
}

// open ends every wait, once.
func (g *gate) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

func (g *gate) after(d time.Duration) <-chan time.Time {
	g.waiting <- d
	return g.release
}

// waited waits until a request is held by the gate.
func (g *gate) waited(t *testing.T) {
	t.Helper()
	select {
	case <-g.waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("no request reached the latency within 10s")
	}
}

// callOnly compares what a test states about a line: not the times.
var callOnly = cmpopts.IgnoreFields(CallRecord{}, "Start", "End")

// TestCallLogOverlap holds one provision in a latency fault while a second
// provision of the same instance is served: the second's line names the
// first as in flight, the first's names nothing.
func TestCallLogOverlap(t *testing.T) {
	log := newLineWriter()
	var g *gate
	f := newFixture(t, Options{CallLog: log, After: func(d time.Duration) <-chan time.Time { return g.after(d) }})
	g = newGate(t)
	if err := f.b.InjectFault(Fault{Endpoint: EndpointProvision, Latency: time.Second, Count: 1}); err != nil {
		t.Fatal(err)
	}
	first := make(chan int, 1)
	go func() { first <- f.do(provisionSync(id)).status }()
	g.waited(t)

	f.must(req{method: "GET", path: instancePath(id)}, 404)               // not a mutating call
	f.must(req{method: "PUT", path: instancePath(id), noAuth: true}, 401) // not authenticated
	f.must(provisionSync(id), 201)
	want := CallRecord{Endpoint: EndpointProvision, InstanceID: id, Status: 201,
		InFlight: []CallFlight{{Endpoint: EndpointProvision}}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("the second provision (-want +got):\n%s", diff)
	}

	g.open()
	if got := <-first; got != 200 {
		t.Errorf("the first provision: %d, want 200 (the instance exists by then)", got)
	}
	want = CallRecord{Endpoint: EndpointProvision, InstanceID: id, Status: 200, InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("the first provision (-want +got):\n%s", diff)
	}

	// Nothing is in flight any more.
	f.must(req{method: "PUT", path: bindingPath(id, bid), body: bindBody(ServiceID, PlanSyncID, "")}, 201)
	want = CallRecord{Endpoint: EndpointBind, InstanceID: id, BindingID: bid, Status: 201, InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("a later bind (-want +got):\n%s", diff)
	}
	log.none(t)
}

// TestCallLogInProgress logs calls that meet an asynchronous operation in
// progress, and the times from the broker's clock.
func TestCallLogInProgress(t *testing.T) {
	log := newLineWriter()
	f := newFixture(t, Options{CallLog: log})
	start := f.clock.Now()

	f.must(provisionAsync(id), 202)
	want := CallRecord{Start: start, End: start, Endpoint: EndpointProvision, InstanceID: id, Status: 202,
		Async: true, Operation: "provision-1", InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t)); diff != "" {
		t.Errorf("async provision (-want +got):\n%s", diff)
	}

	f.must(req{method: "DELETE", path: instancePath(id) + asyncQuery(PlanAsyncID)}, 422)
	want = CallRecord{Endpoint: EndpointDeprovision, InstanceID: id, Status: 422, InFlight: []CallFlight{},
		InProgress: &CallOperation{Endpoint: EndpointProvision, Operation: "provision-1"}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("deprovision while provisioning (-want +got):\n%s", diff)
	}

	f.clock.Advance(DefaultAsyncDelay)
	f.must(req{method: "PUT", path: bindingPath(id, bid) + "?accepts_incomplete=true", body: bindBody(ServiceID, PlanAsyncID, "")}, 202)
	want = CallRecord{Endpoint: EndpointBind, InstanceID: id, BindingID: bid, Status: 202, Async: true,
		Operation: "bind-2", InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("bind once provisioned (-want +got):\n%s", diff)
	}

	f.must(req{method: "DELETE", path: bindingPath(id, bid) + asyncQuery(PlanAsyncID)}, 422)
	want = CallRecord{Endpoint: EndpointUnbind, InstanceID: id, BindingID: bid, Status: 422, InFlight: []CallFlight{},
		InProgress: &CallOperation{Endpoint: EndpointBind, BindingID: bid, Operation: "bind-2"}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("unbind while binding (-want +got):\n%s", diff)
	}

	// An instance call meets its bindings' operations too: the gateway's
	// locks forbid a deprovision during a bind.
	f.must(req{method: "DELETE", path: instancePath(id) + asyncQuery(PlanAsyncID)}, 202)
	want = CallRecord{Endpoint: EndpointDeprovision, InstanceID: id, Status: 202, Async: true, Operation: "deprovision-3",
		InFlight: []CallFlight{}, InProgress: &CallOperation{Endpoint: EndpointBind, BindingID: bid, Operation: "bind-2"}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("deprovision while binding (-want +got):\n%s", diff)
	}
	log.none(t)
}

// TestCallLogFaults logs calls a fault answered and calls whose client went
// away before anything was written.
func TestCallLogFaults(t *testing.T) {
	log := newLineWriter()
	var g *gate
	f := newFixture(t, Options{CallLog: log, After: func(d time.Duration) <-chan time.Time { return g.after(d) }})
	g = newGate(t)
	faults := []Fault{
		{Endpoint: EndpointBind, Status: 500, Count: 1},
		{Endpoint: EndpointDeprovision, Latency: time.Second, Hang: true, Count: 1},
	}
	for _, ft := range faults {
		if err := f.b.InjectFault(ft); err != nil {
			t.Fatal(err)
		}
	}

	f.must(req{method: "PUT", path: bindingPath(id, bid), body: bindBody(ServiceID, PlanSyncID, "")}, 500)
	want := CallRecord{Endpoint: EndpointBind, InstanceID: id, BindingID: bid, Status: 500, InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("fault-answered bind (-want +got):\n%s", diff)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, "DELETE", f.srv.URL+instancePath(id)+query(ServiceID, PlanSyncID), nil)
	if err != nil {
		t.Fatal(err)
	}
	hr.SetBasicAuth(testUser, testPass)
	hr.Header.Set("X-Broker-API-Version", "2.17")
	done := make(chan error, 1)
	go func() {
		resp, err := f.srv.Client().Do(hr)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	g.waited(t)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("client: %v, want its cancellation", err)
	}
	want = CallRecord{Endpoint: EndpointDeprovision, InstanceID: id, Status: 0, InFlight: []CallFlight{}}
	if diff := cmp.Diff(want, log.next(t), callOnly); diff != "" {
		t.Errorf("deprovision whose client left (-want +got):\n%s", diff)
	}
	log.none(t)
}

// TestCallLogLine pins the line format the campaign's checker reads.
func TestCallLogLine(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	rec := CallRecord{Start: at, End: at.Add(time.Millisecond), Endpoint: EndpointProvision, InstanceID: "i",
		Status: 202, Async: true, Operation: "provision-12", InFlight: []CallFlight{{Endpoint: EndpointBind, BindingID: "b1"}},
		InProgress: &CallOperation{Endpoint: EndpointProvision, Operation: "provision-3"}}
	got, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"start":"2026-01-02T03:04:05.0000006Z","end":"2026-01-02T03:04:05.0010006Z","endpoint":"provision",` +
		`"instance_id":"i","binding_id":"","status":202,"async":true,"operation":"provision-12",` +
		`"in_flight":[{"endpoint":"bind","binding_id":"b1"}],` +
		`"in_progress":{"endpoint":"provision","binding_id":"","operation":"provision-3"}}`
	if string(got) != want {
		t.Errorf("line\n%s\nwant\n%s", got, want)
	}
}
